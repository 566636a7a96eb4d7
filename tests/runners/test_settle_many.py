"""The batch finish's successes, settled together: what each single finish
does after a success (health, events, queued runs, chains, the count), in
one transaction for all of them."""

import datetime as dt
import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import Counter
from dispatch import claims, identity
from dispatch import leases as dispatch
from notifications.models import Event
from runners.models import RunnerToken
from scheduler.jobs.job_health import JobHealth
from scheduler.models import Execution
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
DONE = NOW + dt.timedelta(seconds=5)
pytestmark = pytest.mark.django_db


@pytest.fixture
def issued():
    return RunnerToken.issue("batch-token")


@pytest.fixture
def runner(issued):
    return RunnerFactory(token=issued[0], labels=[], session="s1", capacity=100)


def run(runner, job, at=NOW):
    """A running execution of `job` at `at`, held by `runner`."""
    ExecutionFactory(job=job, scheduled_for=at)
    (execution,) = claims.claim(runner, runner.session, 1, at)
    return execution


def report(execution, exit_code=0, lease=None):
    lease = execution.lease if lease is None else lease
    return (execution.pk, lease, exit_code, "", False)


def finish_many(secret, runner, reports, now=DONE):
    credential = identity.Credential(secret)
    return dispatch.finish_many(credential, runner.pk, runner.session, reports, now)


def states(*executions):
    return [Execution.objects.get(pk=e.pk).state for e in executions]


def succeeded_total():
    return Counter.objects.value_of("croniq_executions_total", "state=succeeded")


def test_successes_of_several_jobs_settle_together_each_job_counting_its_own(runner, issued):
    daily, hourly = JobFactory(), JobFactory()
    first = run(runner, daily)
    finish_many(issued[1], runner, [report(first)])  # the health row exists
    runs = [run(runner, daily, NOW + dt.timedelta(minutes=m)) for m in (1, 2)]
    runs.append(run(runner, hourly, NOW + dt.timedelta(minutes=3)))

    answers = finish_many(issued[1], runner, [report(e) for e in runs])

    assert [a["state"] for a in answers] == ["succeeded"] * 3
    assert states(*runs) == [Execution.SUCCEEDED] * 3
    assert Execution.objects.get(pk=runs[0].pk).finished_at == DONE
    assert JobHealth.objects.get(job=daily).succeeded == 3
    health = JobHealth.objects.get(job=hourly)
    assert (health.succeeded, health.last_state, health.last_success_at) == (1, "succeeded", DONE)
    assert succeeded_total() == 4
    assert not Event.objects.exists()  # plain successes: nothing to tell


def test_the_statements_of_a_batch_do_not_grow_with_its_successes_on_postgresql(runner, issued):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite settles one report a statement (no round trip to save)")

    def statements(count, minute):
        runs = [run(runner, JobFactory(), NOW + dt.timedelta(minutes=minute)) for _ in range(count)]
        with CaptureQueriesContext(connection) as queries:
            finish_many(issued[1], runner, [report(e) for e in runs])
        assert states(*runs) == [Execution.SUCCEEDED] * count
        return len(queries)

    statements(1, 0)  # the token's use and the counter's row, written once
    assert statements(2, 1) == statements(12, 2)


def test_a_batch_success_that_ends_a_streak_is_job_recovered(runner, issued):
    failing, healthy = JobFactory(), JobFactory()
    for minute in (1, 2):
        finish_many(
            issued[1], runner, [report(run(runner, failing, NOW + dt.timedelta(minutes=minute)), 1)]
        )
    Event.objects.all().delete()
    runs = [
        run(runner, failing, NOW + dt.timedelta(minutes=5)),
        run(runner, healthy, NOW + dt.timedelta(minutes=6)),
    ]
    runs.append(run(runner, failing, NOW + dt.timedelta(minutes=7)))

    finish_many(issued[1], runner, [report(e) for e in runs])

    (recovered,) = Event.objects.all()
    assert (recovered.name, recovered.job_id, recovered.data["streak"]) == (
        "job.recovered",
        failing.pk,
        2,
    )
    health = JobHealth.objects.get(job=failing)
    assert (health.failure_streak, health.succeeded, health.failed) == (0, 2, 2)
    assert JobHealth.objects.get(job=healthy).succeeded == 1
    assert succeeded_total() == 3


def test_a_batch_success_shorter_than_the_minimum_duration_is_job_fast(runner, issued):
    job = JobFactory(min_duration=30)
    finish_many(issued[1], runner, [report(run(runner, job))])
    (fast,) = Event.objects.all()
    assert (fast.name, fast.data["duration"]) == ("job.fast", 5.0)
    assert JobHealth.objects.get(job=job).succeeded == 1


def test_a_batch_success_promotes_the_jobs_queued_run(runner, issued):
    job = JobFactory(overlap="queue")
    execution = run(runner, job)
    queued = ExecutionFactory(
        job=job, scheduled_for=NOW + dt.timedelta(minutes=1), state=Execution.QUEUED
    )
    finish_many(issued[1], runner, [report(execution), report(run(runner, JobFactory()))])
    queued.refresh_from_db()
    assert queued.state == Execution.PENDING


def test_a_batch_success_starts_the_jobs_chained_to_it(runner, issued):
    JobFactory(name="report", schedule="0 0 1 1 *")
    upstream = run(runner, JobFactory(name="import", on_success=["report"]))
    finish_many(issued[1], runner, [report(upstream)])
    (chained,) = Execution.objects.filter(job__name="report", trigger=Execution.CHAIN)
    assert (chained.upstream_id, chained.state) == (upstream.pk, Execution.PENDING)


def test_a_success_not_held_under_its_lease_is_refused_and_the_rest_settle(runner, issued):
    held, stale = run(runner, JobFactory()), run(runner, JobFactory())
    answers = finish_many(issued[1], runner, [report(stale, lease=stale.lease + 1), report(held)])
    assert [(a["status"], a.get("state")) for a in answers] == [(409, None), (200, "succeeded")]
    assert states(stale, held) == [Execution.RUNNING, Execution.SUCCEEDED]
    assert succeeded_total() == 1


def test_a_batch_retried_after_it_was_taken_is_answered_and_counted_once(runner, issued):
    runs = [run(runner, JobFactory()) for _ in range(3)]
    reports = [report(e) for e in runs]
    finish_many(issued[1], runner, reports)
    again = finish_many(issued[1], runner, reports + reports[:1])
    assert [a["state"] for a in again] == ["succeeded"] * 4
    assert succeeded_total() == 3
    assert [h.succeeded for h in JobHealth.objects.order_by("job_id")] == [1, 1, 1]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks are PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_batches_over_the_same_jobs_in_opposite_orders_never_deadlock():
    """Two runners' batches settle runs of the same jobs, listed in opposite
    orders, at the same moment: the health rows lock in job order, so
    neither waits for the other in a cycle (PostgreSQL would abort one)."""
    token, secret = RunnerToken.issue("t")
    runners = [RunnerFactory(token=token, session=f"s{n}", capacity=100) for n in range(2)]
    jobs = [JobFactory() for _ in range(40)]
    for round_ in range(6):
        at = NOW + dt.timedelta(minutes=round_)
        # The second runner's runs are created, and listed, in reverse job order.
        held = [
            [run(r, job, at + dt.timedelta(seconds=n)) for job in (jobs if n == 0 else jobs[::-1])]
            for n, r in enumerate(runners)
        ]
        assert settle_at_once(secret, runners, held, at) == []
    assert Execution.objects.filter(state=Execution.SUCCEEDED).count() == 2 * 40 * 6
    assert {h.succeeded for h in JobHealth.objects.all()} == {12}


def settle_at_once(secret, runners, batches, now):
    """Each runner's batch from its own thread, released together; the errors."""
    start = threading.Barrier(len(runners))
    failures = []

    def settle(runner, runs):
        try:
            start.wait()
            finish_many(secret, runner, [report(e) for e in runs], now=now)
        except Exception as error:  # noqa: BLE001 - the test reports it
            failures.append(error)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=settle, args=pair) for pair in zip(runners, batches, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return failures
