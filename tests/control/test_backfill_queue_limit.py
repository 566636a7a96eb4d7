"""A backfill respects CRONIQ_TRIGGER_QUEUE_LIMIT as a trigger does: it
never leaves a job more pending executions than the limit. The pending ones
already there in the way: 429 with Retry-After; the range alone too big:
422 naming `end`. Either way nothing is created; a dry run still lists."""

import datetime as dt

import pytest
import time_machine

from audit.models import AuditEvent
from scheduler.models import Execution
from tests.control.conftest import management_as
from tests.factories import ExecutionFactory, JobFactory

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def api(db, settings):
    settings.CRONIQ_TRIGGER_QUEUE_LIMIT = 5
    return management_as("jobs:trigger")


def at(hour):
    return dt.datetime(2026, 12, 1, hour, 0, tzinfo=dt.UTC)


def fill(api, start, end, **more):
    body = {"start": start.isoformat(), "end": end.isoformat(), **more}
    return api.post("jobs/hourly/backfill", body)


def pending(job):
    return Execution.objects.filter(job=job, state=Execution.PENDING).count()


def test_backfills_stop_at_the_queue_limit_with_429_and_retry_after(api):
    job = JobFactory(name="hourly", schedule="0 * * * *")
    assert fill(api, at(0), at(3)).status_code == 202  # 3 pending

    answer = fill(api, at(3), at(6))  # 3 more: 6 > 5

    assert answer.status_code == 429, answer.content
    assert answer["Retry-After"] == "5"
    assert answer.json()["detail"] == (
        "hourly has 3 pending executions; 3 more would pass the limit of 5 "
        "(CRONIQ_TRIGGER_QUEUE_LIMIT); try again later"
    )
    assert pending(job) == 3
    assert AuditEvent.objects.filter(action="job.backfilled").count() == 1


def test_a_backfill_filling_the_queue_exactly_is_taken(api):
    job = JobFactory(name="hourly", schedule="0 * * * *")
    ExecutionFactory(job=job, scheduled_for=at(8))  # a pending run already there
    answer = fill(api, at(0), at(4))
    assert answer.status_code == 202, answer.content
    assert pending(job) == 5


def test_a_range_with_more_runs_than_the_limit_is_422_naming_end(api):
    job = JobFactory(name="hourly", schedule="0 * * * *")
    answer = fill(api, at(0), at(6))
    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"] == (
        "end: the range makes 6 runs, more than the 5 pending executions a job may have "
        "(CRONIQ_TRIGGER_QUEUE_LIMIT); backfill a shorter range"
    )
    assert not Execution.objects.filter(job=job).exists()
    assert not AuditEvent.objects.exists()


def test_a_dry_run_still_lists_the_instants(api):
    JobFactory(name="hourly", schedule="0 * * * *")
    answer = fill(api, at(0), at(6), dry_run=True)
    assert answer.status_code == 202, answer.content
    assert (len(answer.json()["instants"]), answer.json()["created"]) == (6, 0)


def test_a_job_with_an_overlap_policy_takes_its_backfill_queued(api):
    """Its runs wait queued and become pending as its policy lets them:
    the pending queue stays within the policy's own bound."""
    job = JobFactory(name="hourly", schedule="0 * * * *", overlap="skip")
    answer = fill(api, at(0), at(9))
    assert answer.status_code == 202, answer.content
    assert (pending(job), Execution.objects.filter(job=job, state="queued").count()) == (1, 8)
