"""`manage.py next_runs` through call_command, with the database (docs/design.md §5)."""

import datetime as dt
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from calendars.models import CalendarPeriod
from tests.factories import T0, CalendarFactory, CalendarPeriodFactory, JobFactory

pytestmark = pytest.mark.django_db
WORKDAYS = ["mon", "tue", "wed", "thu", "fri"]


def next_runs(*args):
    out, err = StringIO(), StringIO()
    call_command("next_runs", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def office_job():
    calendar = CalendarFactory(
        name="de-by-workdays",
        timezone="Europe/Berlin",
        weekdays=WORKDAYS,
        holiday_country="DE",
        holiday_subdivision="BY",
    )
    CalendarPeriodFactory(
        calendar=calendar, kind=CalendarPeriod.EXCLUDE, label="Christmas freeze"
    )  # 24 Dec 2026 .. 6 Jan 2027
    return JobFactory(
        name="report", schedule="0 9 * * *", timezone="Europe/Berlin", calendar=calendar
    )


def test_json_lists_fire_times_after_the_given_instant_with_the_calendar(office_job):
    out, err = next_runs("report", "--after", "2026-12-22T09:00:00+01:00", "--count", "3", "--json")
    assert json.loads(out) == [
        "2026-12-23T08:00:00+00:00",
        "2027-01-07T08:00:00+00:00",
        "2027-01-08T08:00:00+00:00",
    ]
    assert err == ""


def test_after_is_exclusive_and_defaults_to_utc_without_an_offset(office_job):
    out, _ = next_runs("report", "--after", "2026-12-23T08:00:00", "--count", "1", "--json")
    assert json.loads(out) == ["2027-01-07T08:00:00+00:00"]


def test_defer_policy_is_honoured(office_job):
    office_job.calendar_policy = "defer"
    office_job.save()
    out, _ = next_runs("report", "--after", "2026-12-23T09:00:00+01:00", "--count", "2", "--json")
    assert json.loads(out) == ["2027-01-06T23:00:00+00:00", "2027-01-07T08:00:00+00:00"]


def test_count_defaults_to_ten_and_plain_output_shows_utc_and_local_time(office_job):
    out, _ = next_runs("report", "--after", "2027-01-08T12:00:00Z")
    lines = out.splitlines()
    assert len(lines) == 10
    assert lines[0] == "2027-01-11T08:00:00+00:00  2027-01-11T09:00:00+01:00"


def test_every_schedule_keeps_the_grid_of_its_next_run():
    # The loop fires next_run_at, then every 1h30m after it, whatever --after is.
    JobFactory(name="poll", schedule="@every 1h30m", next_run_at=T0 + dt.timedelta(seconds=7))
    out, _ = next_runs("poll", "--after", "2026-06-01T10:00:00+00:00", "--count", "3", "--json")
    assert json.loads(out) == [
        "2026-06-01T10:30:07+00:00",
        "2026-06-01T12:00:07+00:00",
        "2026-06-01T13:30:07+00:00",
    ]
    out, _ = next_runs("poll", "--after", "2026-06-01T12:00:07+00:00", "--count", "1", "--json")
    assert json.loads(out) == ["2026-06-01T13:30:07+00:00"]


def test_every_schedule_without_a_next_run_counts_from_after():
    # Paused: resuming at --after would count from there.
    JobFactory(name="poll", schedule="@every 1h30m", next_run_at=None, paused_at=T0)
    out, _ = next_runs("poll", "--after", "2026-05-04T10:00:07+00:00", "--count", "2", "--json")
    assert json.loads(out) == ["2026-05-04T11:30:07+00:00", "2026-05-04T13:00:07+00:00"]


def test_job_that_never_fires_prints_an_empty_list_and_says_why():
    calendar = CalendarFactory(name="workdays", timezone="Europe/Berlin", weekdays=WORKDAYS)
    JobFactory(name="saturday", schedule="0 9 * * 6", timezone="Europe/Berlin", calendar=calendar)
    out, err = next_runs("saturday", "--after", "2026-05-04T00:00:00Z", "--json")
    assert json.loads(out) == []
    assert "never fires: schedule '0 9 * * 6' never meets calendar 'workdays' within 5 years" in err


def test_a_weekday_range_ending_on_sunday_lists_the_weekend():
    JobFactory(name="weekend", schedule="0 9 * * sat-sun", timezone="UTC")
    out, err = next_runs("weekend", "--after", "2026-12-04T00:00:00Z", "--count", "3", "--json")
    assert json.loads(out) == [
        "2026-12-05T09:00:00+00:00",
        "2026-12-06T09:00:00+00:00",
        "2026-12-12T09:00:00+00:00",
    ]
    assert err == ""


def test_a_minute_wildcard_lists_both_passes_of_a_repeated_hour():
    JobFactory(name="sweep", schedule="*/30 2 * * *", timezone="Europe/Berlin")
    out, _ = next_runs("sweep", "--after", "2026-10-24T23:00:00Z", "--count", "5", "--json")
    assert json.loads(out) == [
        "2026-10-25T00:00:00+00:00",  # 02:00 CEST
        "2026-10-25T00:30:00+00:00",
        "2026-10-25T01:00:00+00:00",  # 02:00 CET: the hour again
        "2026-10-25T01:30:00+00:00",
        "2026-10-26T01:00:00+00:00",
    ]


def test_unknown_job_exits_1_with_a_clear_message():
    with pytest.raises(CommandError, match="unknown job 'nope'") as caught:
        next_runs("nope", "--json")
    assert caught.value.returncode == 1


@pytest.mark.parametrize("after", ["yesterday", "2026-13-01T00:00:00", ""])
def test_malformed_after_is_a_clear_error(office_job, after):
    with pytest.raises(CommandError, match="argument --after: invalid ISO 8601 instant value"):
        next_runs("report", "--after", after)


def test_count_must_be_positive(office_job):
    with pytest.raises(CommandError, match="argument --count"):
        next_runs("report", "--count", "0")


# --- @business_day ---------------------------------------------------------------


def test_business_day_job_lists_the_last_bavarian_working_days(office_job):
    office_job.schedule = "@business_day -1 18:00"
    office_job.save()
    out, err = next_runs("report", "--after", "2027-01-01T00:00:00Z", "--count", "3", "--json")
    assert json.loads(out) == [
        "2027-01-29T17:00:00+00:00",
        "2027-02-26T17:00:00+00:00",
        "2027-03-31T16:00:00+00:00",  # summer time
    ]
    assert err == ""


def test_a_month_with_too_few_allowed_days_is_named_on_stderr():
    # Allowed: January, two days of February and March 2027.
    calendar = CalendarFactory(name="sparse", timezone="Europe/Berlin")
    for start, end in [((1, 1), (1, 31)), ((2, 10), (2, 11)), ((3, 1), (3, 31))]:
        CalendarPeriodFactory(
            calendar=calendar,
            kind=CalendarPeriod.INCLUDE,
            start_date=dt.date(2027, *start),
            end_date=dt.date(2027, *end),
        )
    JobFactory(
        name="close", schedule="@business_day 3 09:00", timezone="Europe/Berlin", calendar=calendar
    )
    out, err = next_runs("close", "--after", "2027-01-01T00:00:00Z", "--count", "2", "--json")
    assert json.loads(out) == ["2027-01-03T08:00:00+00:00", "2027-03-03T08:00:00+00:00"]
    assert err.splitlines() == [
        "job 'close': no occurrence in February 2027: calendar 'sparse' allows 2 days "
        "that month, fewer than 3"
    ]
    # The JSON on stdout stays a plain list; with the months fitting N, no notice.
    _, err = next_runs("close", "--after", "2027-01-01T00:00:00Z", "--count", "1")
    assert err == ""
