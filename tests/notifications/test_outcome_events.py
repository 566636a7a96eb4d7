"""The events a settled execution causes are recorded in the settling
transaction, and each job's health follows its runs."""

import datetime as dt

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from dispatch import claims, identity
from dispatch import leases as dispatch
from dispatch.loop_steps import update_runner_states
from notifications.models import Event
from runners.models import Runner, RunnerToken
from scheduler.firing import ticks
from scheduler.jobs.job_health import JobHealth
from scheduler.models import Execution
from scheduler.runs import lifecycle
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
pytestmark = pytest.mark.django_db


@pytest.fixture
def issued():
    return RunnerToken.issue("events-token")


@pytest.fixture
def runner(issued):
    return RunnerFactory(token=issued[0], labels=["linux"], session="s1", capacity=4)


def run(runner, job, at=NOW):
    """Create, claim and return a running execution of `job` at `at`."""
    ExecutionFactory(job=job, scheduled_for=at)
    (execution,) = claims.claim(runner, "s1", 1, at)
    execution.refresh_from_db()
    return execution


def finish(secret, execution, exit_code, seconds=5):
    at = execution.claimed_at + dt.timedelta(seconds=seconds)
    credential = identity.Credential(secret)
    return dispatch.finish(
        credential, execution.pk, "s1", execution.lease, exit_code, "", False, at
    )


def names(job=None):
    events = Event.objects.order_by("id")
    if job is not None:
        events = events.filter(job=job)
    return [event.name for event in events]


def test_a_failed_attempt_with_a_retry_left_is_reported_but_not_given_up(runner, issued):
    job = JobFactory(retries=1, retry_backoff=10)
    execution = run(runner, job)
    assert finish(issued[1], execution, 3) == Execution.FAILED
    assert names() == ["execution.failed"]
    event = Event.objects.get()
    assert event.execution_id == execution.pk
    assert event.data["job"] == {"name": job.name, "owner": "", "labels": []}
    assert event.data["execution"]["exit_code"] == 3
    assert event.routed_at is None
    assert JobHealth.objects.get(job=job).failure_streak == 0


def test_a_run_that_fails_for_good_extends_the_streak_and_says_so(runner, issued):
    job = JobFactory(owner="team-a")
    for minute in range(3):
        execution = run(runner, job, NOW + dt.timedelta(minutes=minute))
        finish(issued[1], execution, 1)
    assert names() == ["execution.failed", "execution.given_up", "job.failing"] * 3
    streaks = [e.data["streak"] for e in Event.objects.filter(name="job.failing").order_by("id")]
    assert streaks == [1, 2, 3]
    health = JobHealth.objects.get(job=job)
    assert (health.failure_streak, health.failed, health.last_state) == (3, 3, "failed")
    assert health.failing_since is not None


def test_the_first_success_after_a_streak_is_job_recovered_and_ends_it(runner, issued):
    job = JobFactory()
    for minute in range(2):
        finish(issued[1], run(runner, job, NOW + dt.timedelta(minutes=minute)), 1)
    Event.objects.all().delete()
    success = run(runner, job, NOW + dt.timedelta(minutes=5))
    assert finish(issued[1], success, 0) == Execution.SUCCEEDED
    (recovered,) = Event.objects.all()
    assert recovered.name == "job.recovered"
    assert recovered.data["streak"] == 2
    health = JobHealth.objects.get(job=job)
    assert (health.failure_streak, health.succeeded) == (0, 1)
    assert health.last_success_at == success.claimed_at + dt.timedelta(seconds=5)

    # The next success of a healthy job takes the plain path: no event.
    finish(issued[1], run(runner, job, NOW + dt.timedelta(minutes=10)), 0)
    assert names() == ["job.recovered"]
    assert JobHealth.objects.get(job=job).succeeded == 2


def test_a_success_shorter_than_the_minimum_duration_is_job_fast(runner, issued):
    job = JobFactory(min_duration=30)
    finish(issued[1], run(runner, job), 0, seconds=2)
    finish(issued[1], run(runner, job, NOW + dt.timedelta(minutes=1)), 0, seconds=45)
    (fast,) = Event.objects.all()
    assert fast.name == "job.fast"
    assert fast.data["duration"] == 2.0 and fast.data["min_duration"] == 30
    assert JobHealth.objects.get(job=job).succeeded == 2


def test_a_plain_success_writes_no_event(runner, issued):
    job = JobFactory()
    finish(issued[1], run(runner, job), 0)
    assert names() == []
    assert JobHealth.objects.get(job=job).succeeded == 1


def test_a_plain_success_is_two_statements_on_postgresql(runner, issued):
    """The settling write, the health update and the look for queued runs
    are one statement on PostgreSQL (then the counter); SQLite sends them
    one by one."""
    job = JobFactory()
    finish(issued[1], run(runner, job), 0)  # creates the health row
    execution = run(runner, job, at=NOW + dt.timedelta(minutes=1))
    with CaptureQueriesContext(connection) as queries:
        assert finish(issued[1], execution, 0) == Execution.SUCCEEDED
    statements = [q["sql"] for q in queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == (2 if connection.vendor == "postgresql" else 4)
    health = JobHealth.objects.get(job=job)
    assert (health.succeeded, health.last_state) == (2, Execution.SUCCEEDED)
    assert health.last_success_at == execution.claimed_at + dt.timedelta(seconds=5)


def test_a_success_after_failures_takes_the_full_path_in_the_same_finish(runner, issued):
    job = JobFactory()
    finish(issued[1], run(runner, job), 3)
    execution = run(runner, job, at=NOW + dt.timedelta(minutes=1))
    assert finish(issued[1], execution, 0) == Execution.SUCCEEDED
    assert names()[-1] == "job.recovered"
    assert JobHealth.objects.get(job=job).failure_streak == 0


def test_a_success_promotes_the_jobs_queued_run(runner, issued):
    job = JobFactory(overlap="queue")
    execution = run(runner, job)
    queued = ExecutionFactory(
        job=job, scheduled_for=NOW + dt.timedelta(minutes=1), state=Execution.QUEUED
    )
    with CaptureQueriesContext(connection) as queries:
        assert finish(issued[1], execution, 0) == Execution.SUCCEEDED
    queued.refresh_from_db()
    assert queued.state == Execution.PENDING
    # The finish's own look for queued runs is not made again by the promotion.
    looks = [q for q in queries if q["sql"].startswith(("SELECT 1 FROM", "SELECT EXISTS"))]
    assert len(looks) == (0 if connection.vendor == "postgresql" else 1)


def test_a_timeout_and_a_reap_are_reported_and_counted(runner, issued):
    job = JobFactory(timeout=10)
    execution = run(runner, job)
    assert ticks.time_out(execution, NOW + dt.timedelta(minutes=5)) is True
    reaped = run(runner, JobFactory(name="reaped"))
    lifecycle.release(
        Execution.objects.filter(pk=reaped.pk), lifecycle.LEASE_EXPIRED, NOW, actor=None
    )
    assert names(job)[:1] == ["execution.timed_out"]
    assert "execution.lost" in names(reaped.job)
    assert JobHealth.objects.get(job=job).timed_out == 1
    assert JobHealth.objects.get(job=reaped.job).lost == 1


def test_the_event_rolls_back_with_the_state_change(runner, issued):
    execution = run(runner, JobFactory())
    with pytest.raises(RuntimeError), transaction.atomic():
        lifecycle.settle(execution, Execution.FAILED, NOW, exit_code=1)
        assert names() == ["execution.failed", "execution.given_up", "job.failing"]
        raise RuntimeError("the process dies before the commit")
    assert names() == []
    execution.refresh_from_db()
    assert execution.state == Execution.RUNNING
    assert not JobHealth.objects.filter(job=execution.job, failed__gt=0).exists()


def test_a_runner_going_offline_and_flapping_are_events(issued, settings):
    silent = RunnerFactory(token=issued[0], labels=["gpu"], last_seen_at=NOW)
    assert update_runner_states(NOW + dt.timedelta(minutes=5)) == 1
    (offline,) = Event.objects.all()
    assert (offline.name, offline.runner_id) == ("runner.offline", silent.pk)
    assert offline.data["labels"] == ["gpu"] and offline.data["runner"] == {"name": silent.name}
    assert Runner.objects.get(pk=silent.pk).state == Runner.OFFLINE

    settings.CRONIQ_FLAP_THRESHOLD = 1
    token = issued[0]
    for n in range(3):
        identity.register(token, "flappy", f"session-{n}", NOW + dt.timedelta(seconds=n))
    assert names().count("runner.flapping") == 1
