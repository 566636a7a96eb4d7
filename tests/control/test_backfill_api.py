"""`POST /api/v1/jobs/{name}/backfill` (control.triggers_api, scheduler.firing.backfill):
the past instants of a range as executions, oldest first, a singleton's one
at a time."""

import datetime as dt

import pytest
import time_machine

from audit.models import AuditEvent
from dispatch.claims import ready_executions
from scheduler.models import Execution
from scheduler.runs import lifecycle, operations, overlap
from tests.control.conftest import management_as
from tests.factories import CalendarFactory, CalendarPeriodFactory, ExecutionFactory, JobFactory

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
H = dt.timedelta(hours=1)


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def at(hour, day=1):
    return dt.datetime(2026, 12, day, hour, 0, tzinfo=dt.UTC)


def fill(api, name, start, end, **more):
    body = {"start": start.isoformat(), "end": end.isoformat(), **more}
    return api.post(f"jobs/{name}/backfill", body)


def iso(*instants):
    return [i.isoformat().replace("+00:00", "Z") for i in instants]


def instants_of(answer):
    return [dt.datetime.fromisoformat(i) for i in answer.json()["instants"]]


def test_each_instant_of_the_range_becomes_a_backfill_execution(api):
    job = JobFactory(name="hourly", schedule="0 * * * *")
    answer = fill(api, "hourly", at(4), at(7))  # [04:00, 07:00)

    assert answer.status_code == 202
    assert instants_of(answer) == [at(4), at(5), at(6)]
    assert answer.json()["created"] == 3
    rows = Execution.objects.filter(job=job).order_by("scheduled_for")
    assert [(e.scheduled_for, e.trigger, e.state, e.run_after) for e in rows] == [
        (at(h), "backfill", "pending", NOW) for h in (4, 5, 6)
    ]
    event = AuditEvent.objects.get(action="job.backfilled")
    assert event.data["created"] == 3 and event.actor_kind == "api_key"


def test_instants_that_have_an_execution_are_skipped(api):
    job = JobFactory(name="hourly", schedule="0 * * * *")
    ExecutionFactory(job=job, scheduled_for=at(5), state="failed")

    answer = fill(api, "hourly", at(4), at(7))

    assert instants_of(answer) == [at(4), at(6)]
    assert answer.json()["created"] == 2
    assert Execution.objects.filter(trigger="backfill").count() == 2
    assert fill(api, "hourly", at(4), at(7)).json() == {"instants": [], "created": 0}


def test_the_calendar_as_it_is_now_removes_blocked_instants(api):
    calendar = CalendarFactory(name="no-sunday")
    CalendarPeriodFactory(
        calendar=calendar, start_date=dt.date(2026, 11, 29), end_date=dt.date(2026, 11, 29)
    )
    JobFactory(name="daily", schedule="0 6 * * *", calendar=calendar)

    answer = fill(api, "daily", at(0, day=1) - 4 * 24 * H, at(0, day=1))  # Nov 27 .. 30

    days = [i.day for i in instants_of(answer)]
    assert days == [27, 28, 30]


def test_a_dry_run_lists_and_creates_nothing(api):
    JobFactory(name="hourly", schedule="0 * * * *")
    answer = fill(api, "hourly", at(4), at(6), dry_run=True)

    assert answer.json() == {"instants": iso(at(4), at(5)), "created": 0}
    assert not Execution.objects.exists()
    assert not AuditEvent.objects.filter(action="job.backfilled").exists()


def test_more_instants_than_the_cap_are_refused_naming_it(api, settings):
    settings.CRONIQ_BACKFILL_CAP = 3
    JobFactory(name="hourly", schedule="0 * * * *")

    refused = fill(api, "hourly", at(3), at(7))

    assert refused.status_code == 422
    assert "more than 3 instants (CRONIQ_BACKFILL_CAP)" in refused.json()["detail"]
    assert not Execution.objects.exists()
    assert fill(api, "hourly", at(4), at(7)).json()["created"] == 3


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"start": "2026-12-01T07:00:00Z", "end": "2026-12-01T04:00:00Z"}, "end"),
        ({"start": "2026-12-01T07:00:00Z", "end": "2026-12-01T07:00:00Z"}, "end"),
        ({"start": "2026-12-01T07:00:00Z", "end": "2026-12-01T12:00:00Z"}, "end"),
        ({"end": "2026-12-01T07:00:00Z"}, "start"),
        ({"start": "2026-12-01T04:00:00+99:00", "end": "2026-12-01T07:00:00Z"}, "start"),
        ({"start": "2026-12-01T04:00:00Z", "end": "later"}, "end"),
        ({"start": "2026-12-01T04:00:00Z", "end": "2026-12-01T07:00:00Z", "dry_run": "y"},
         "dry_run"),
    ],
)  # fmt: skip
def test_bad_input_is_422_naming_the_field_and_creates_nothing(api, body, field):
    JobFactory(name="hourly", schedule="0 * * * *")
    answer = api.post("jobs/hourly/backfill", body)
    assert answer.status_code == 422
    assert field in answer.json()["detail"]
    assert not Execution.objects.exists()


def test_an_unknown_job_is_404_and_the_call_needs_jobs_trigger(db):
    JobFactory(name="hourly", schedule="0 * * * *")
    assert fill(management_as("jobs:trigger"), "nope", at(4), at(7)).status_code == 404
    refused = fill(management_as("jobs:write"), "hourly", at(4), at(7))
    assert refused.json() == {"detail": "needs scope jobs:trigger"}
    assert not Execution.objects.exists()


def test_a_backfill_is_dispatched_oldest_instant_first(api):
    JobFactory(name="hourly", schedule="0 * * * *")
    fill(api, "hourly", at(4), at(7))
    ready = ready_executions(NOW)
    assert [e.scheduled_for for e in ready] == [at(4), at(5), at(6)]


def live(job):
    return list(Execution.objects.filter(job=job, state__in=["pending", "running"]))


def finish(execution, state="succeeded"):
    Execution.objects.filter(pk=execution.pk).update(state="running", lease=1)
    execution.refresh_from_db()
    return lifecycle.settle(execution, state, NOW)


def test_a_singleton_backfill_runs_one_instant_at_a_time_oldest_first(api):
    job = JobFactory(name="single", schedule="0 * * * *", singleton=True)
    assert fill(api, "single", at(4), at(7)).json()["created"] == 3

    seen = []
    while live(job):
        [current] = live(job)
        seen.append(current.scheduled_for)
        assert Execution.objects.filter(job=job, state="queued").count() == 3 - len(seen)
        finish(current)
    assert seen == [at(4), at(5), at(6)]


def test_a_singleton_backfill_waits_for_a_live_run_and_its_retry(api):
    job = JobFactory(name="single", schedule="0 * * * *", singleton=True, retries=1)
    running = ExecutionFactory(job=job, scheduled_for=at(9), state="running", lease=1)
    fill(api, "single", at(4), at(6))
    assert live(job) == [running]

    retry = finish(running, "failed")  # its retry goes first
    assert live(job) == [retry]
    finish(retry)
    assert [e.scheduled_for for e in live(job)] == [at(4)]


def test_cancelling_a_singleton_s_pending_backfill_moves_on_and_queued_ones_cancel(api):
    job = JobFactory(name="single", schedule="0 * * * *", singleton=True)
    fill(api, "single", at(3), at(6))
    [first] = live(job)
    operations.cancel(Execution.objects.filter(pk=first.pk), NOW, None)
    [second] = live(job)
    assert second.scheduled_for == at(4)

    queued = Execution.objects.get(job=job, state="queued")
    assert operations.cancel(Execution.objects.filter(pk=queued.pk), NOW, None) == 1
    assert Execution.objects.get(pk=queued.pk).state == "cancelled"


def test_the_loop_promotes_queued_runs_whose_job_has_none_live(api):
    job = JobFactory(name="single", schedule="0 * * * *", singleton=True)
    other = JobFactory(name="busy", schedule="0 * * * *", singleton=True)
    fill(api, "single", at(4), at(6))
    fill(api, "busy", at(4), at(6))
    Execution.objects.filter(job=job, state="pending").delete()  # e.g. withdrawn

    assert overlap.promote_waiting(NOW) == 1
    assert [e.scheduled_for for e in live(job)] == [at(5)]
    assert [e.scheduled_for for e in live(other)] == [at(4)]
