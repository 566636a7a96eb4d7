"""`pause_after_failures: N`: a job pauses itself after N runs in a row
failed for good (after their retries), audited and as a job.paused event;
a success ends the streak; N < 1 is refused naming the field."""

import datetime as dt

import pytest

from audit.models import AuditEvent
from notifications.models import Event
from scheduler.apply.document import apply
from scheduler.apply.items import ApplyError
from scheduler.models import Execution, Job
from scheduler.runs import lifecycle, operations
from tests.control.keyed_client import KeyedClient
from tests.factories import ExecutionFactory, JobFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def at(minutes):
    return T0 + dt.timedelta(minutes=minutes)


def settle(job, minutes, state, attempt=1):
    running = ExecutionFactory(
        job=job, scheduled_for=at(minutes), attempt=attempt, state=Execution.RUNNING, lease=1
    )
    lifecycle.settle(running, state, at(minutes) + dt.timedelta(seconds=30))
    job.refresh_from_db()
    return job


def test_the_job_pauses_at_the_nth_failure_in_a_row_and_not_before():
    job = JobFactory(pause_after_failures=3, next_run_at=at(60))
    settle(job, 0, Execution.FAILED)
    settle(job, 5, Execution.TIMED_OUT)
    assert job.paused_at is None
    settle(job, 10, Execution.FAILED)
    assert job.paused_at == at(10) + dt.timedelta(seconds=30)
    assert job.pause_reason == "paused after 3 consecutive failures"
    assert job.next_run_at is None

    event = AuditEvent.objects.get(action="job.paused")
    assert (event.actor_kind, event.actor_name) == (AuditEvent.SYSTEM, "scheduler")
    assert event.data["streak"] == 3
    assert Event.objects.get(name="job.paused").job_id == job.pk


def test_a_success_resets_the_streak():
    job = JobFactory(pause_after_failures=2)
    settle(job, 0, Execution.FAILED)
    settle(job, 5, Execution.SUCCEEDED)
    settle(job, 10, Execution.FAILED)
    assert job.paused_at is None
    settle(job, 15, Execution.FAILED)
    assert job.paused_at is not None


def test_failures_that_are_retried_do_not_count_until_the_retries_are_spent():
    job = JobFactory(pause_after_failures=1, retries=1)
    settle(job, 0, Execution.FAILED)  # a retry follows: not settled yet
    assert job.paused_at is None
    Execution.objects.filter(job=job, attempt=2).delete()
    settle(job, 0, Execution.FAILED, attempt=2)
    assert job.paused_at is not None


def test_a_job_without_the_field_never_pauses_itself():
    job = JobFactory()
    for minutes in range(5):
        settle(job, minutes, Execution.FAILED)
    assert job.paused_at is None
    assert not AuditEvent.objects.filter(action="job.paused").exists()


def test_a_job_an_operator_paused_keeps_that_pause():
    job = JobFactory(pause_after_failures=1)
    operations.pause(Job.objects.filter(pk=job.pk), T0, None, reason="by hand")
    settle(job, 0, Execution.FAILED)
    assert job.pause_reason == "by hand"
    assert AuditEvent.objects.filter(action="job.paused").count() == 1


def test_a_resumed_job_pauses_again_at_its_next_failure_of_the_streak():
    job = JobFactory(pause_after_failures=1)
    settle(job, 0, Execution.FAILED)
    operations.resume(Job.objects.filter(pk=job.pk), at(1), None)
    settle(job, 5, Execution.FAILED)
    assert job.paused_at is not None
    assert AuditEvent.objects.filter(action="job.paused").count() == 2


ITEM = {"name": "nightly", "schedule": "@daily", "command": "true"}


@pytest.mark.parametrize("value", [0, -1, "three", True])
def test_a_pause_after_failures_below_one_is_refused_naming_the_field(value):
    with pytest.raises(ApplyError, match=r"jobs\[0\]\.pause_after_failures: "):
        apply({"jobs": [{**ITEM, "pause_after_failures": value}]}, now=T0)
    assert not Job.objects.exists()


def test_apply_sets_the_fields():
    apply({"jobs": [{**ITEM, "pause_after_failures": 3, "maintenance": "defer"}]}, now=T0)
    job = Job.objects.get(name="nightly")
    assert (job.pause_after_failures, job.maintenance) == (3, Job.DEFER)


def test_apply_refuses_an_unknown_maintenance_mode_naming_the_field():
    with pytest.raises(ApplyError, match=r"jobs\[0\]\.maintenance: "):
        apply({"jobs": [{**ITEM, "maintenance": "later"}]}, now=T0)


def test_the_api_sets_the_fields_and_refuses_zero_naming_the_field(client):
    api = KeyedClient(client, ["jobs:read", "jobs:write"])
    created = api.post("jobs", {**ITEM, "pause_after_failures": 2, "maintenance": "defer"})
    assert created.status_code == 201, created.content
    assert (created.json()["pause_after_failures"], created.json()["maintenance"]) == (2, "defer")
    refused = api.patch("jobs/nightly", {"pause_after_failures": 0})
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("pause_after_failures: ")
    assert Job.objects.get(name="nightly").pause_after_failures == 2
