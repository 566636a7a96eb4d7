"""Overlap policies (docs/design.md §10): what an occurrence due while runs of
its job are live becomes, and how waiting runs get their turn."""

import datetime as dt

import pytest

from audit.models import AuditEvent
from dispatch import claims, loop_steps
from scheduler.firing import ticks
from scheduler.models import Execution, Job
from scheduler.runs import lifecycle, operations
from scheduler.triage.dead_letters import DeadLetter
from tests.factories import JobFactory, RunnerFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)


def minute(n):
    return T0 + n * MINUTE


def fire(n):
    ticks.trigger_due(minute(n))


def states(job):
    return [e.state for e in job.executions.order_by("scheduled_for", "attempt")]


def claim_all(job, now, runner=None):
    runner = runner or RunnerFactory(capacity=50)
    return claims.claim(runner, runner.session, 50, now)


def finish(execution, state, now):
    execution.refresh_from_db()
    return lifecycle.settle(execution, state, now)


def every_minute(**fields):
    return JobFactory(schedule="* * * * *", next_run_at=minute(0), **fields)


def test_queue_runs_max_concurrent_queues_in_order_and_skips_past_max_queue():
    job = every_minute(overlap=Job.QUEUE, max_concurrent=2, max_queue=1)
    for n in range(4):
        fire(n)
        claim_all(job, minute(n))
    assert states(job) == ["running", "running", "queued", "skipped"]
    skipped = job.executions.get(state=Execution.SKIPPED)
    assert "queue is full" in skipped.error
    event = AuditEvent.objects.get(action="execution.skipped", target_id=str(skipped.pk))
    assert event.data["reason"] == "queue_full"

    first = job.executions.order_by("scheduled_for").first()
    finish(first, Execution.SUCCEEDED, minute(4))
    assert states(job) == ["succeeded", "running", "pending", "skipped"]
    promoted = job.executions.get(state=Execution.PENDING)
    assert promoted.scheduled_for == minute(2)  # the queued one, in its instant's order


def test_queue_never_promotes_past_max_concurrent():
    job = every_minute(overlap=Job.QUEUE, max_concurrent=2)
    for n in range(5):
        fire(n)
    assert states(job) == ["pending", "pending", "queued", "queued", "queued"]
    assert operations.cancel(job.executions.filter(scheduled_for=minute(0)), minute(5), None)
    assert states(job) == ["cancelled", "pending", "pending", "queued", "queued"]


def test_a_queue_of_one_is_guarded_by_the_singleton_index_too():
    job = every_minute(overlap=Job.QUEUE)
    fire(0)
    fire(1)
    assert [e.singleton for e in job.executions.order_by("scheduled_for")] == [True, True]
    assert states(job) == ["pending", "queued"]


def test_replace_asks_the_running_run_to_stop_and_starts_after_it_ended():
    job = every_minute(overlap=Job.REPLACE, retries=3)
    fire(0)
    [old] = claim_all(job, minute(0))
    fire(1)
    old.refresh_from_db()
    assert old.state == Execution.RUNNING and old.cancel_requested_at == minute(1)
    assert states(job) == ["running", "queued"]
    # Never two at once: the newcomer is not handed out while the old one runs.
    assert claim_all(job, minute(1)) == []
    assert AuditEvent.objects.filter(action="execution.replaced", target_id=str(old.pk)).exists()

    # Its runner kills it and reports: cancelled, no retry, no dead letter.
    old.refresh_from_db()
    assert finish(old, Execution.CANCELLED, minute(1) + dt.timedelta(seconds=5)) is None
    assert states(job) == ["cancelled", "pending"]
    assert len(claim_all(job, minute(2))) == 1


def test_replace_of_a_vanished_runner_waits_for_the_lease_then_neither_retries_nor_files_it(
    settings,
):
    settings.CRONIQ_LEASE_TTL = 30
    job = every_minute(overlap=Job.REPLACE, retries=3)
    fire(0)
    claim_all(job, minute(0))
    fire(1)
    assert claim_all(job, minute(1)) == []
    loop_steps.reap_expired_leases(minute(0) + dt.timedelta(seconds=31))
    assert states(job) == ["lost", "pending"]  # no retry attempt of the replaced run
    assert not DeadLetter.objects.exists()


def test_replace_cancels_a_run_that_has_not_started_at_once():
    job = every_minute(overlap=Job.REPLACE)
    fire(0)
    fire(1)
    assert states(job) == ["cancelled", "pending"]
    old = job.executions.get(state=Execution.CANCELLED)
    assert "replaced by the occurrence" in old.error


def test_replace_keeps_only_the_newest_waiting_occurrence():
    job = every_minute(overlap=Job.REPLACE)
    fire(0)
    claim_all(job, minute(0))
    fire(1)
    fire(2)
    assert states(job) == ["running", "cancelled", "queued"]
    assert job.executions.get(state=Execution.QUEUED).scheduled_for == minute(2)


def test_skip_is_the_singleton_alias():
    job = every_minute(singleton=True)
    assert job.overlap == Job.SKIP
    fire(0)
    fire(1)
    assert states(job) == ["pending", "skipped"]


def test_a_manual_run_of_a_queue_job_waits_its_turn_and_a_full_queue_refuses_it():
    job = every_minute(overlap=Job.QUEUE, max_concurrent=1, max_queue=1)
    fire(0)
    waiting = operations.run_now(job, minute(0) + dt.timedelta(seconds=10), None)
    assert waiting.state == Execution.QUEUED
    with pytest.raises(operations.OperationRefused, match="full queue"):
        operations.run_now(job, minute(0) + dt.timedelta(seconds=20), None)
    assert job.executions.count() == 2


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"overlap": Job.REPLACE, "singleton": True}, "overlap"),
        ({"overlap": Job.QUEUE, "max_concurrent": 0}, "max_concurrent"),
        ({"overlap": Job.SKIP, "max_concurrent": 2}, "max_concurrent"),
        ({"overlap": Job.ALLOW, "max_queue": 2}, "max_queue"),
    ],
)
def test_an_impossible_policy_is_refused_naming_the_field(fields, field):
    from django.core.exceptions import ValidationError

    job = Job(name="x", schedule="* * * * *", command="true", **fields)
    with pytest.raises(ValidationError) as refused:
        job.full_clean()
    assert field in refused.value.message_dict
