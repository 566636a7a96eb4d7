"""Operator actions: run now, pause/resume, cancel, retry — each audited."""

import datetime as dt

import pytest
from django.contrib.auth.models import User

from audit.models import AuditEvent
from scheduler.models import Execution
from scheduler.runs import operations
from tests.factories import ExecutionFactory, JobFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def operator():
    return User.objects.create_user("ops", is_staff=True)


def test_run_now_creates_a_manual_execution_and_audits_it(operator):
    job = JobFactory()
    execution = operations.run_now(job, T0, operator)
    assert (execution.trigger, execution.state, execution.run_after) == ("manual", "pending", T0)
    event = AuditEvent.objects.get(action="job.run_now")
    assert (event.actor_kind, event.actor_name) == ("user", "ops")


def test_run_now_respects_singleton(operator):
    job = JobFactory(singleton=True)
    ExecutionFactory(job=job, state=Execution.RUNNING)
    with pytest.raises(operations.OperationRefused, match="singleton"):
        operations.run_now(job, T0, operator)
    assert job.executions.count() == 1


def test_pause_stops_firing_and_resume_reschedules_from_now(operator):
    job = JobFactory(schedule="*/5 * * * *", next_run_at=T0)
    jobs = type(job).objects.filter(pk=job.pk)

    assert operations.pause(jobs, T0, operator) == 1
    job.refresh_from_db()
    assert job.paused_at == T0 and job.next_run_at is None

    later = T0 + dt.timedelta(hours=2, minutes=1)
    assert operations.resume(jobs, later, operator) == 1
    job.refresh_from_db()
    assert job.paused_at is None
    assert job.next_run_at == T0 + dt.timedelta(hours=2, minutes=5)
    assert AuditEvent.objects.filter(action__in=["job.paused", "job.resumed"]).count() == 2


def test_cancel_ends_pending_at_once_and_asks_running_ones_to_stop(operator):
    pending = ExecutionFactory(scheduled_for=T0)
    running = ExecutionFactory(scheduled_for=T0, state=Execution.RUNNING, lease=1)
    done = ExecutionFactory(scheduled_for=T0, state=Execution.SUCCEEDED)

    assert operations.cancel(Execution.objects.all(), T0, operator) == 2

    pending.refresh_from_db()
    running.refresh_from_db()
    done.refresh_from_db()
    assert pending.state == Execution.CANCELLED
    assert running.state == Execution.RUNNING and running.cancel_requested_at == T0
    assert done.state == Execution.SUCCEEDED
    assert AuditEvent.objects.filter(action="execution.cancel").count() == 2


def test_retry_makes_the_next_attempt_of_a_failed_run(operator):
    failed = ExecutionFactory(scheduled_for=T0, state=Execution.FAILED, attempt=1)
    new = operations.retry(failed, T0 + dt.timedelta(minutes=1), operator)
    assert (new.attempt, new.trigger, new.scheduled_for) == (2, "retry", T0)


def test_a_succeeded_run_cannot_be_retried(operator):
    done = ExecutionFactory(state=Execution.SUCCEEDED)
    with pytest.raises(operations.OperationRefused):
        operations.retry(done, T0, operator)
