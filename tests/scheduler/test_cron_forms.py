"""Named cases of the Quartz day forms and the H forms (scheduler/jobs/cron.py): pure."""

import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, time
from pathlib import Path

import pytest

from calendars.rules import CalendarRules, get_zone
from scheduler.jobs.cron import ScheduleError, describe, next_fire, next_fires, parse_schedule

BERLIN = get_zone("Europe/Berlin")
ROOT = Path(__file__).resolve().parents[2]
BAVARIAN_WORKDAYS = CalendarRules(
    timezone="Europe/Berlin",
    weekdays=frozenset(range(5)),
    holiday_country="DE",
    holiday_subdivision="BY",
    window_start=time(6),
    window_end=time(22),
    name="de-by-workdays",
)


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def local_days(text, tz, after, count, key=None):
    zone = get_zone(tz)
    fires = next_fires(text, tz, None, after, count, key=key)
    return [f.astimezone(zone).strftime("%a %Y-%m-%d %H:%M") for f in fires]


# --- Quartz day forms ---------------------------------------------------------------


def test_last_day_of_february_in_a_leap_year():
    assert next_fire("0 9 L * *", "Europe/Berlin", None, utc(2028, 2, 1)) == utc(2028, 2, 29, 8)
    assert local_days("0 9 L * *", "UTC", utc(2027, 1, 15), 3) == [
        "Sun 2027-01-31 09:00",
        "Sun 2027-02-28 09:00",
        "Wed 2027-03-31 09:00",
    ]


def test_last_weekday_of_the_month_steps_back_from_a_weekend():
    # 2028: April ends on a Sunday, September on a Saturday, February on a Tuesday.
    assert local_days("0 9 LW * *", "UTC", utc(2028, 2, 1), 1) == ["Tue 2028-02-29 09:00"]
    assert local_days("0 9 LW 4 *", "UTC", utc(2028, 1, 1), 1) == ["Fri 2028-04-28 09:00"]
    assert local_days("0 9 LW 9 *", "UTC", utc(2028, 1, 1), 1) == ["Fri 2028-09-29 09:00"]


@pytest.mark.parametrize(
    "day, month, expected",
    [
        (15, 1, "Fri 2028-01-14 09:00"),  # the 15th is a Saturday: the Friday before
        (16, 1, "Mon 2028-01-17 09:00"),  # the 16th is a Sunday: the Monday after
        (17, 1, "Mon 2028-01-17 09:00"),  # a weekday: itself
        (1, 1, "Mon 2028-01-03 09:00"),  # Saturday the 1st: never back into December
        (1, 10, "Mon 2028-10-02 09:00"),  # Sunday the 1st
        (30, 4, "Fri 2028-04-28 09:00"),  # Sunday the 30th, the last day: never into May
        (31, 12, "Fri 2028-12-29 09:00"),  # Sunday the 31st, the last day of the year
    ],
)
def test_nearest_weekday_never_leaves_the_month(day, month, expected):
    assert local_days(f"0 9 {day}W {month} *", "UTC", utc(2028, 1, 1), 1) == [expected]


def test_nearest_weekday_to_a_day_the_month_lacks_skips_the_month():
    # As plain `31` does: February and April have no 31st.
    assert local_days("0 9 31W * *", "UTC", utc(2028, 1, 15), 3) == [
        "Mon 2028-01-31 09:00",
        "Fri 2028-03-31 09:00",
        "Wed 2028-05-31 09:00",
    ]


def test_last_friday_and_second_monday():
    assert local_days("0 9 * * 5L", "UTC", utc(2028, 1, 1), 3) == [
        "Fri 2028-01-28 09:00",
        "Fri 2028-02-25 09:00",
        "Fri 2028-03-31 09:00",
    ]
    assert local_days("0 9 * * 1#2", "UTC", utc(2028, 1, 1), 2) == [
        "Mon 2028-01-10 09:00",
        "Mon 2028-02-14 09:00",
    ]


def test_weekday_names_and_sunday_as_zero_or_seven_work_in_the_forms():
    first_sunday = local_days("0 9 * * 0#1", "UTC", utc(2028, 1, 1), 2)
    assert first_sunday == ["Sun 2028-01-02 09:00", "Sun 2028-02-06 09:00"]
    assert local_days("0 9 * * 7#1", "UTC", utc(2028, 1, 1), 2) == first_sunday
    assert local_days("0 9 * * SUN#1", "UTC", utc(2028, 1, 1), 2) == first_sunday
    assert local_days("0 9 * * friL", "UTC", utc(2028, 1, 1), 1) == ["Fri 2028-01-28 09:00"]


def test_a_fifth_weekday_fires_only_in_months_that_have_one():
    assert local_days("0 9 * * 1#5", "UTC", utc(2028, 1, 1), 2) == [
        "Mon 2028-01-31 09:00",
        "Mon 2028-05-29 09:00",
    ]


def test_both_day_fields_restricted_fire_on_either_as_cron_does():
    # The last day of the month, or the first Monday.
    assert local_days("0 9 L * 1#1", "UTC", utc(2028, 1, 1), 4) == [
        "Mon 2028-01-03 09:00",
        "Mon 2028-01-31 09:00",
        "Mon 2028-02-07 09:00",
        "Tue 2028-02-29 09:00",
    ]


def test_forms_and_plain_days_mix_in_a_list():
    assert local_days("0 9 1,L * *", "UTC", utc(2028, 2, 2), 3) == [
        "Tue 2028-02-29 09:00",
        "Wed 2028-03-01 09:00",
        "Fri 2028-03-31 09:00",
    ]


def test_the_dst_rule_is_unchanged_for_the_forms():
    # 29 Mar 2026, the last Sunday of March: 02:30 does not exist in Berlin,
    # so it fires when the gap ends; 25 Oct 2026, the last Sunday of October:
    # 02:30 happens twice and fires once.
    assert next_fire("30 2 * * 0L", BERLIN, None, utc(2026, 3, 20)) == utc(2026, 3, 29, 1)
    fires = next_fires("30 2 * * 0L", BERLIN, None, utc(2026, 10, 20), 2)
    assert fires == [utc(2026, 10, 25, 0, 30), utc(2026, 11, 29, 1, 30)]


def test_last_friday_on_a_holiday_under_defer_runs_at_the_next_allowed_instant():
    # Good Friday 2027 is 26 March, the last Friday of the month; Easter Monday
    # follows, so the calendar next allows Tuesday 30 March at 06:00 (CEST).
    after = utc(2027, 3, 1)
    deferred = next_fire("0 9 * * 5L", BERLIN, BAVARIAN_WORKDAYS, after, "defer")
    assert deferred == utc(2027, 3, 30, 4)
    skipped = next_fire("0 9 * * 5L", BERLIN, BAVARIAN_WORKDAYS, after, "skip")
    assert skipped == utc(2027, 4, 30, 7)


def test_the_forms_are_described_in_words():
    assert describe("0 9 L * *") == "At 09:00 AM, on the last day of the month"
    assert describe("0 9 * * 5L") == "At 09:00 AM, on the last Friday of the month"
    assert describe("0 9 * * 1#2") == "At 09:00 AM, on the second Monday of the month"


# --- H ---------------------------------------------------------------------------------


def test_h_spreads_300_nightly_jobs_over_the_hour():
    minutes = Counter()
    for n in range(300):
        schedule = parse_schedule("H 2 * * *", key=f"job-{n}")
        assert schedule.hours == (2,)
        minutes.update(schedule.minutes)
    mean = 300 / 60
    assert sum(minutes.values()) == 300
    assert max(minutes.values()) <= 3 * mean
    assert len(minutes) >= 50  # nearly every minute of the hour is used


def test_h_is_the_same_minute_in_another_process():
    # Python's hash() differs per process (PYTHONHASHSEED); H must not.
    code = (
        "from scheduler.jobs.cron import parse_schedule;"
        "print(parse_schedule('H H * * *', key='nightly-report').expression)"
    )
    answers = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    here = parse_schedule("H H * * *", key="nightly-report").expression
    assert answers == {here}


def test_h_differs_between_names_and_between_minute_and_hour():
    a = parse_schedule("H H * * *", key="import")
    b = parse_schedule("H H * * *", key="export")
    assert (a.minutes, a.hours) != (b.minutes, b.hours)
    assert a.text == b.text == "H H * * *"


def test_h_in_a_range_and_with_a_step():
    schedule = parse_schedule("H(0-29) H(1-3) * * *", key="backup")
    assert 0 <= schedule.minutes[0] <= 29 and len(schedule.minutes) == 1
    assert 1 <= schedule.hours[0] <= 3 and len(schedule.hours) == 1
    stepped = parse_schedule("H/15 * * * *", key="backup").minutes
    assert len(stepped) == 4 and stepped[0] < 15
    assert [b - a for a, b in zip(stepped, stepped[1:], strict=False)] == [15, 15, 15]


def test_h_resolves_before_the_dst_rule_and_the_description():
    schedule = parse_schedule("H 2 * * *", key="nightly-report")
    minute = schedule.minutes[0]
    assert schedule.expression == f"{minute} 2 * * *"
    assert describe("H 2 * * *", key="nightly-report") == f"At 02:{minute:02d} AM"
    # 02:xx does not exist on 29 Mar 2026 in Berlin: it fires when the gap ends.
    found = next_fire("H 2 * * *", BERLIN, None, utc(2026, 3, 28, 12), key="nightly-report")
    assert found == utc(2026, 3, 29, 1)


def test_a_schedule_without_h_ignores_the_key():
    assert parse_schedule("30 2 * * *", key="a") is parse_schedule("30 2 * * *", key="b")
    assert parse_schedule("0 9 * * thu", key="a") is parse_schedule("0 9 * * thu", key="b")


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("0 0 32L * *", "day-of-month field: '32L' is not a day form"),
        ("0 0 32W * *", "day-of-month field: 32 is out of range 1-31"),
        ("0 0 0W * *", "day-of-month field: 0 is out of range 1-31"),
        ("0 0 W * *", "day-of-month field: 'W' needs a day before it"),
        ("0 0 L-3 * *", "day-of-month field: 'L-3' is not a day form"),
        ("0 0 L/2 * *", "day-of-month field: 'L/2' is not a day form"),
        ("0 0 1#2 * *", "day-of-month field: '1#2': # belongs in the day-of-week field"),
        ("0 0 * * 1#6", r"day-of-week field: '1#6': the n of #n must be 1-5"),
        ("0 0 * * 1#0", r"day-of-week field: '1#0': the n of #n must be 1-5"),
        ("0 0 * * 8L", "day-of-week field: 8 is out of range 0-7"),
        ("0 0 * * 8#1", "day-of-week field: 8 is out of range 0-7"),
        ("0 0 * * L", "day-of-week field: 'L' needs a weekday before it"),
        ("0 0 * * 1-5L", "day-of-week field: '1-5L': L and # take one weekday"),
        ("0 0 * * 1#", "day-of-week field: '1#': L and # take one weekday"),
        ("0 L * * *", "hour field: 'L': L, W and # are only for the day-of-month"),
        ("15W 0 * * *", "minute field: '15W': L, W and # are only for the day-of-month"),
        ("0 0 * L *", "month field: 'L' is not a number in 1-12"),
        ("H(50-10) * * * *", r"minute field: range H\(50-10\) runs backwards"),
        ("0 H(0-24) * * *", "hour field: 24 is out of range 0-23"),
        ("H/0 * * * *", "minute field: step '0' must be a whole number >= 1"),
        ("H5 * * * *", "minute field: 'H5' is not a hash form"),
        ("H(5) * * * *", r"minute field: 'H\(5\)' is not a hash form"),
        ("0 0 H * *", "day-of-month field: H is only for the minute and hour fields"),
        ("0 0 * * H", "day-of-week field: H is only for the minute and hour fields"),
    ],
)
def test_malformed_forms_are_refused_naming_the_field(text, message):
    with pytest.raises(ScheduleError, match=message):
        parse_schedule(text, key="job")


def test_h_without_a_key_is_refused_naming_the_field():
    with pytest.raises(ScheduleError, match="minute field: H needs the job's name"):
        parse_schedule("H 2 * * *")
    with pytest.raises(ScheduleError, match="hour field: H needs the job's name"):
        next_fire("0 H * * *", "UTC", None, utc(2026, 1, 1), key="")
