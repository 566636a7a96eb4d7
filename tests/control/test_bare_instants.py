"""Instants without an offset in the management API (control.fields): a bare
date (`2026-12-08`, its midnight) or date and time (`2026-12-08T09:00`) is
read on the job's clock in a job's calls, on the calendar's in its preview,
in UTC in every other call; a wall time the clocks skip is the end of the
gap, one they pass twice its first occurrence. Answers carry offsets."""

import datetime as dt

import pytest
import time_machine

from scheduler.models import Execution, Job
from tests.control.keyed_client import KeyedClient
from tests.factories import CalendarFactory, ExecutionFactory, JobFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def api(client):
    return KeyedClient(client, ["admin"], name="ops")


def utc(*fields):
    return dt.datetime(*fields, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("zone", "until", "paused_until"),
    [
        ("Europe/Berlin", "2026-12-08", "2026-12-07T23:00:00Z"),
        ("Europe/Berlin", "2026-12-08T09:00", "2026-12-08T08:00:00Z"),
        ("Europe/Berlin", "2026-12-08T09:00:30", "2026-12-08T08:00:30Z"),
        ("America/New_York", "2026-12-08", "2026-12-08T05:00:00Z"),
        ("UTC", "2026-12-08", "2026-12-08T00:00:00Z"),
        # An offset is the caller's word: the job's clock does not come into it.
        ("Europe/Berlin", "2026-12-08T09:00:00+05:00", "2026-12-08T04:00:00Z"),
        ("Europe/Berlin", "2026-12-08T09:00:00Z", "2026-12-08T09:00:00Z"),
    ],
)
def test_a_pause_until_a_bare_date_is_read_in_the_jobs_timezone(api, zone, until, paused_until):
    JobFactory(name="report", timezone=zone)

    answer = api.post("jobs/report/pause", {"until": until})

    assert answer.status_code == 200, answer.content
    assert answer.json()["paused_until"] == paused_until


@pytest.mark.parametrize(
    ("until", "paused_until"),
    [
        # 28 March 2027: Berlin's clocks go from 02:00 CET to 03:00 CEST.
        # 02:30 never shows: the end of the gap, 03:00 CEST, as a schedule's.
        ("2027-03-28T02:30", "2027-03-28T01:00:00Z"),
        ("2027-03-28T03:00", "2027-03-28T01:00:00Z"),
        ("2027-03-28T01:59", "2027-03-28T00:59:00Z"),
        # 31 October 2027: from 03:00 CEST back to 02:00 CET; 02:30 shows
        # twice and is its first time, still in summer time.
        ("2027-10-31T02:30", "2027-10-31T00:30:00Z"),
        ("2027-10-31T03:00", "2027-10-31T02:00:00Z"),
    ],
)
def test_a_bare_wall_time_across_a_dst_change_is_read_as_schedules_are(api, until, paused_until):
    JobFactory(name="report", timezone="Europe/Berlin")

    answer = api.post("jobs/report/pause", {"until": until})

    assert answer.status_code == 200, answer.content
    assert answer.json()["paused_until"] == paused_until


def test_next_after_a_bare_date_starts_at_the_jobs_midnight(api):
    # 00:30 in Berlin is 23:30 UTC the day before: read in UTC, the 8th's
    # run (7 December 23:30 UTC) would be missing.
    JobFactory(name="late", schedule="30 0 * * *", timezone="Europe/Berlin")

    answer = api.get("jobs/late/next", count=2, after="2026-12-08")

    assert answer.status_code == 200, answer.content
    assert answer.json()["instants"] == ["2026-12-07T23:30:00+00:00", "2026-12-08T23:30:00+00:00"]


def test_a_backfill_range_of_bare_dates_is_read_in_the_jobs_timezone(api):
    JobFactory(name="hourly", schedule="0 * * * *", timezone="Europe/Berlin")
    body = {"start": "2026-11-30", "end": "2026-11-30T02:00", "dry_run": True}

    answer = api.post("jobs/hourly/backfill", body)

    assert answer.status_code == 202, answer.content
    assert answer.json()["instants"] == ["2026-11-29T23:00:00Z", "2026-11-30T00:00:00Z"]


def test_a_triggers_bare_scheduled_for_is_read_in_the_jobs_timezone(api):
    JobFactory(name="report", timezone="Asia/Tokyo")

    answer = api.post("jobs/report/trigger", {"scheduled_for": "2026-12-01T09:00"})

    assert answer.status_code == 202, answer.content
    execution = Execution.objects.get(pk=answer.json()["execution_id"])
    assert execution.scheduled_for == utc(2026, 12, 1, 0, 0)


def test_a_calendar_preview_of_bare_dates_is_read_in_the_calendars_timezone(api):
    weekdays = ["mon", "tue", "wed", "thu", "fri"]
    CalendarFactory(name="office", timezone="Europe/Berlin", weekdays=weekdays)

    # Monday 7 December, the whole day on Berlin's clock.
    answer = api.get("calendars/office/preview", start="2026-12-07", end="2026-12-08")

    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "allowed": [{"start": "2026-12-06T23:00:00Z", "end": "2026-12-07T23:00:00Z"}]
    }


def test_calls_about_no_job_read_a_bare_instant_in_utc(api):
    job = JobFactory(name="report", timezone="Europe/Berlin")
    ExecutionFactory(job=job, scheduled_for=utc(2026, 11, 30, 23, 30))
    late = ExecutionFactory(job=job, scheduled_for=utc(2026, 12, 1, 0, 30))

    listed = api.get("executions", job="report", since="2026-12-01")
    window = {"start": "2026-12-08", "end": "2026-12-08T06:00", "labels": [], "reason": "move"}
    maintenance = api.put("maintenance", {"windows": [window]})
    key = api.post("keys", {"name": "ci", "scopes": ["jobs:read"], "expires_at": "2027-01-01"})

    assert [e["id"] for e in listed.json()["items"]] == [late.pk]
    [stored] = maintenance.json()["windows"]
    assert (stored["start"], stored["end"]) == ("2026-12-08T00:00:00Z", "2026-12-08T06:00:00Z")
    assert key.status_code == 201, key.content
    assert key.json()["expires_at"] == "2027-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("call", "detail"),
    [
        (("post", "jobs/report/pause", {"until": "2026-12-32"}), "until: "),
        (("post", "jobs/report/pause", {"until": "9999-12-31"}), "until: must lie between"),
        (("post", "jobs/report/pause", {"until": "2026-12-01"}), "until: must be in the future"),
        (("post", "jobs/report/backfill", {"start": "soon", "end": "2026-12-01"}), "start: "),
        (("post", "jobs/report/backfill", {"start": "2026-11-01", "end": "0001-01-01"}), "end: "),
        (("post", "jobs/report/trigger", {"scheduled_for": "09:00"}), "scheduled_for: "),
        (("get", "jobs/report/next", {"after": "2026-13-01"}), "after: "),
        (("get", "calendars/office/preview", {"start": "yesterday"}), "start: "),
        (("get", "executions", {"since": "2026-12-01T25:00"}), "since: "),
    ],
)
def test_garbage_is_a_422_naming_the_field_and_changes_nothing(api, call, detail):
    JobFactory(name="report", timezone="Europe/Berlin")
    CalendarFactory(name="office", timezone="Europe/Berlin")
    method, path, data = call
    before = list(Job.objects.values()), Execution.objects.count()

    answer = api.get(path, **data) if method == "get" else api.post(path, data)

    assert answer.status_code == 422, answer.content
    assert detail in answer.json()["detail"]
    assert (list(Job.objects.values()), Execution.objects.count()) == before


def test_a_job_whose_timezone_no_longer_resolves_needs_an_offset(api):
    JobFactory(name="report", timezone="Europe/Berlin")
    # A zone the tz database has since dropped, stored when it still knew it.
    Job.objects.filter(name="report").update(timezone="Europe/Atlantis")

    bare = api.post("jobs/report/pause", {"until": "2026-12-08"})
    offset = api.post("jobs/report/pause", {"until": "2026-12-08T00:00:00+01:00"})

    assert bare.status_code == 422
    assert bare.json()["detail"].startswith("until: needs an offset")
    assert offset.status_code == 200, offset.content
