"""Named cases for `@business_day N HH:MM` (scheduler/jobs/cron.py): pure, fixed instants."""

from datetime import UTC, date, datetime, time

import pytest

from calendars.periods import Period
from calendars.rules import CalendarRules, get_zone
from scheduler.jobs.cron import (
    ScheduleError,
    describe,
    months_without_occurrence,
    never_fires_reason,
    next_fire,
    next_fires,
    parse_schedule,
)

BERLIN = get_zone("Europe/Berlin")
NEW_YORK = get_zone("America/New_York")
WORKDAYS = ("mon", "tue", "wed", "thu", "fri")


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def berlin(*args):
    return datetime(*args, tzinfo=BERLIN)


def de_by_workdays(**extra):
    return CalendarRules(
        timezone="Europe/Berlin",
        weekdays=WORKDAYS,
        holiday_country="DE",
        holiday_subdivision="BY",
        name="de-by-workdays",
        **extra,
    )


EVERY_DAY = CalendarRules(timezone="Europe/Berlin", name="every-day")


# --- parsing and words ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "n", "at"),
    [
        ("@business_day 3 09:00", 3, time(9, 0)),
        ("@business_day -1 18:00", -1, time(18, 0)),
        ("@BUSINESS_DAY  +2   7:05", 2, time(7, 5)),
        ("@business_day 31 23:59", 31, time(23, 59)),
        ("@business_day -31 00:00", -31, time(0, 0)),
    ],
)
def test_business_day_schedules_parse(text, n, at):
    parsed = parse_schedule(text).business_day
    assert (parsed.n, parsed.at) == (n, at)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("@business_day 0 09:00", "day number 0 does not exist: 1 is the first business day"),
        ("@business_day 32 09:00", "day number 32 is out of range: a month has at most 31 days"),
        ("@business_day -32 09:00", "day number -32 is out of range"),
        ("@business_day 3 25:00", "time '25:00' is not a time of day: write HH:MM"),
        ("@business_day 3 09:60", "time '09:60' is not a time of day"),
        ("@business_day 3 9", "time '9' is not a time of day"),
        ("@business_day", "the day number and the time are missing; write it as @business_day N"),
        ("@business_day 3", "the time is missing"),
        ("@business_day 09:00", "the day number is missing"),
        ("@business_day 3 09:00 CET", "it has more than a day number and a time"),
        ("@business_day third 09:00", "day number 'third' is not a whole number"),
        ("@business_days 3 09:00", "unknown macro '@business_days'"),
    ],
)
def test_bad_business_day_schedules_are_refused_naming_the_problem(text, says):
    with pytest.raises(ScheduleError) as refused:
        parse_schedule(text)
    assert says in str(refused.value)


def test_unknown_macros_list_business_day_among_the_known_forms():
    with pytest.raises(ScheduleError, match="@business_day N HH:MM"):
        parse_schedule("@fortnightly")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("@business_day 3 09:00", "On the 3rd business day of the month at 09:00"),
        ("@business_day 1 7:05", "On the 1st business day of the month at 07:05"),
        ("@business_day 22 12:00", "On the 22nd business day of the month at 12:00"),
        ("@business_day 11 12:00", "On the 11th business day of the month at 12:00"),
        ("@business_day -1 18:00", "On the last business day of the month at 18:00"),
        ("@business_day -2 18:00", "On the 2nd-to-last business day of the month at 18:00"),
    ],
)
def test_describe_says_which_business_day(text, words):
    assert describe(text) == words


# --- which day ---------------------------------------------------------------------------


def test_third_bavarian_business_day_of_a_month_starting_on_a_holiday():
    # January 2027: Fri 1 is New Year's Day, 2-3 the weekend, Mon 4 and Tue 5
    # count, Wed 6 is Epiphany: the 3rd working day is Thu 7.
    found = next_fire("@business_day 3 09:00", "Europe/Berlin", de_by_workdays(), utc(2027, 1, 1))
    assert found == berlin(2027, 1, 7, 9, 0)


def test_a_christmas_freeze_pushes_the_count_past_it():
    # The freeze of docs/design.md §5 (24 Dec - 6 Jan): Jan 7, 8, 11 count.
    freeze = de_by_workdays(exclude=(Period(date(2026, 12, 24), date(2027, 1, 6), "freeze"),))
    found = next_fire("@business_day 3 09:00", "Europe/Berlin", freeze, utc(2027, 1, 1))
    assert found == berlin(2027, 1, 11, 9, 0)


def test_last_bavarian_working_day_of_each_month_at_six_pm():
    fires = next_fires(
        "@business_day -1 18:00", "Europe/Berlin", de_by_workdays(), utc(2029, 1, 1), 6
    )
    assert fires == [
        berlin(2029, 1, 31, 18, 0),
        berlin(2029, 2, 28, 18, 0),
        berlin(2029, 3, 29, 18, 0),  # Fri 30 is Good Friday
        berlin(2029, 4, 30, 18, 0),  # summer time: 16:00 UTC
        berlin(2029, 5, 30, 18, 0),  # Thu 31 is Corpus Christi
        berlin(2029, 6, 29, 18, 0),  # Sat 30
    ]
    assert fires[3] == utc(2029, 4, 30, 16, 0)


def test_without_a_calendar_business_days_are_monday_to_friday():
    # August 2026 starts on a Saturday; only July and December 2026 have 23 weekdays.
    assert next_fire("@business_day 1 09:00", "UTC", None, utc(2026, 7, 31)) == utc(2026, 8, 3, 9)
    fires = next_fires("@business_day 23 09:00", "UTC", None, utc(2026, 1, 1), 2)
    assert fires == [utc(2026, 7, 31, 9), utc(2026, 12, 31, 9)]


def test_more_days_than_monday_to_friday_can_give_never_fire_without_a_calendar():
    assert never_fires_reason("@business_day 24 09:00", "UTC", None, utc(2026, 1, 1))
    every_day = next_fire("@business_day 24 09:00", "Europe/Berlin", EVERY_DAY, utc(2026, 1, 1))
    assert every_day == berlin(2026, 1, 24, 9, 0)


def test_a_month_with_too_few_allowed_days_has_no_occurrence():
    # Allowed: all of January, two days of February, all of March 2027.
    two_in_february = CalendarRules(
        timezone="Europe/Berlin",
        include=(
            Period(date(2027, 1, 1), date(2027, 1, 31)),
            Period(date(2027, 2, 10), date(2027, 2, 11)),
            Period(date(2027, 3, 1), date(2027, 3, 31)),
        ),
        name="sparse",
    )
    fires = next_fires(
        "@business_day 3 09:00", "Europe/Berlin", two_in_february, utc(2027, 1, 1), 2
    )
    assert fires == [berlin(2027, 1, 3, 9, 0), berlin(2027, 3, 3, 9, 0)]
    assert months_without_occurrence(
        "@business_day 3 09:00", "Europe/Berlin", two_in_february, fires[0], fires[1]
    ) == [(date(2027, 2, 1), 2)]
    # N = 2 fits February's two days.
    assert next_fire(
        "@business_day -2 09:00", "Europe/Berlin", two_in_february, utc(2027, 2, 1)
    ) == berlin(2027, 2, 10, 9, 0)


def test_months_without_occurrence_is_empty_for_other_schedules():
    assert (
        months_without_occurrence("0 9 * * *", "UTC", None, utc(2026, 1, 1), utc(2027, 1, 1)) == []
    )


# --- DST: as for a fixed-time cron job -----------------------------------------------------


def test_a_wall_time_in_the_spring_gap_fires_right_after_it():
    # 29 March 2026 is the 29th day of March; 02:30 does not exist in Berlin.
    found = next_fire("@business_day 29 02:30", "Europe/Berlin", EVERY_DAY, utc(2026, 3, 1))
    assert found == utc(2026, 3, 29, 1, 0)  # 03:00 CEST


def test_a_repeated_wall_time_fires_once_at_its_first_occurrence():
    # 25 October 2026 is the 7th-to-last day of October; 02:30 happens twice.
    first = next_fire("@business_day -7 02:30", "Europe/Berlin", EVERY_DAY, utc(2026, 10, 1))
    assert first == utc(2026, 10, 25, 0, 30)  # 02:30 CEST
    assert next_fire("@business_day -7 02:30", "Europe/Berlin", EVERY_DAY, first) == berlin(
        2026, 11, 24, 2, 30
    )


# --- the calendar's windows and the instant's gate ---------------------------------------


def test_a_partly_blocked_day_still_counts_and_its_instant_is_gated():
    # Fri 29 Jan 2027 is blocked from noon on: it is still the last working
    # day, and 18:00 on it is blocked.
    afternoon = de_by_workdays(
        exclude=(Period(berlin(2027, 1, 29, 12, 0), berlin(2027, 1, 30, 0, 0), "move"),)
    )
    schedule, after = "@business_day -1 18:00", utc(2027, 1, 1)
    blocked = []
    skipped = next_fire(schedule, "Europe/Berlin", afternoon, after, "skip", blocked=blocked)
    assert blocked == [berlin(2027, 1, 29, 18, 0)]
    assert skipped == berlin(2027, 2, 26, 18, 0)  # no re-count inside January
    deferred = next_fire(schedule, "Europe/Berlin", afternoon, after, "defer")
    assert deferred == berlin(2027, 2, 1, 0, 0)  # the next allowed instant
    morning = de_by_workdays(
        exclude=(Period(berlin(2027, 1, 29, 0, 0), berlin(2027, 1, 29, 12, 0), "move"),)
    )
    assert next_fire(schedule, "Europe/Berlin", morning, after) == berlin(2027, 1, 29, 18, 0)


def test_a_daily_window_lets_days_count_and_gates_the_wall_time():
    office_hours = de_by_workdays(window_start=time(6), window_end=time(17))
    schedule = "@business_day -1 18:00"
    assert next_fire(schedule, "Europe/Berlin", office_hours, utc(2027, 1, 1), "defer") == berlin(
        2027, 2, 1, 6, 0
    )
    assert next_fire(schedule, "Europe/Berlin", office_hours, utc(2027, 1, 1), "skip") is None
    assert "never meets calendar 'de-by-workdays'" in never_fires_reason(
        schedule, "Europe/Berlin", office_hours, utc(2027, 1, 1)
    )


def test_the_calendar_judges_the_date_and_the_job_timezone_places_the_time():
    # Days are Bavarian working days; 17:00 in New York on Fri 29 Jan 2027
    # is 23:00 in Berlin, still that working day.
    found = next_fire("@business_day -1 17:00", NEW_YORK, de_by_workdays(), utc(2027, 1, 1))
    assert found == datetime(2027, 1, 29, 17, 0, tzinfo=NEW_YORK)
    # 18:00 in New York is midnight in Berlin: on a Friday, that is a
    # Saturday, and the calendar gates the instant (skip: next month).
    blocked = []
    found = next_fire(
        "@business_day -1 18:00", NEW_YORK, de_by_workdays(), utc(2027, 1, 1), blocked=blocked
    )
    assert blocked == [
        datetime(2027, 1, 29, 18, 0, tzinfo=NEW_YORK),
        datetime(2027, 2, 26, 18, 0, tzinfo=NEW_YORK),
    ]
    assert found == datetime(2027, 3, 31, 18, 0, tzinfo=NEW_YORK)  # Wed: Thursday in Berlin


def test_after_is_exclusive():
    fire = berlin(2027, 1, 7, 9, 0)
    found = next_fire("@business_day 3 09:00", "Europe/Berlin", de_by_workdays(), fire)
    assert found == berlin(2027, 2, 3, 9, 0)
