"""Named cases for scheduler/jobs/cron.py: pure, no database, fixed instants."""

from datetime import UTC, date, datetime, time, timedelta

import pytest

from calendars.periods import Period
from calendars.rules import CalendarRules, get_zone
from scheduler.jobs.cron import (
    ScheduleError,
    describe,
    never_fires_reason,
    next_fire,
    next_fires,
    parse_schedule,
)

BERLIN = get_zone("Europe/Berlin")
NEW_YORK = get_zone("America/New_York")
SYDNEY = get_zone("Australia/Sydney")
WORKDAYS = ("mon", "tue", "wed", "thu", "fri")


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def at(zone, *args):
    return datetime(*args, tzinfo=zone)


def fires_on_day(schedule, zone, day, calendar=None):
    """All fire instants whose local date is `day`."""
    start = at(zone, day.year, day.month, day.day) - timedelta(microseconds=1)
    found = next_fires(schedule, zone, calendar, start, 200)
    return [f for f in found if f.astimezone(zone).date() == day]


# --- parsing ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("61 * * * *", "minute field: 61 is out of range 0-59"),
        ("0 24 * * *", "hour field: 24 is out of range 0-23"),
        ("0 0 0 * *", "day-of-month field: 0 is out of range 1-31"),
        ("0 0 1 13 *", "month field: 13 is out of range 1-12"),
        ("0 0 * * 8", "day-of-week field: 8 is out of range 0-7"),
        ("0 0 * foo *", "month field: 'foo' is not a number in 1-12 or a name"),
        ("*/0 * * * *", "minute field: step '0' must be a whole number >= 1"),
        ("30-10 * * * *", "minute field: range 30-10 runs backwards"),
        ("50-10 * * * *", "minute field: range 50-10 runs backwards"),
        ("0 9 * * fri-mon", "day-of-week field: range fri-mon runs backwards"),
        ("0 9 * * 6-1", "day-of-week field: range 6-1 runs backwards"),
        ("0 9 * 12-1 *", "month field: range 12-1 runs backwards"),
        ("1,,2 * * * *", "minute field: empty item"),
        ("* * * *", "has 4 fields; cron needs 5"),
        ("0 0 0 * * * *", "has 7 fields; cron needs 5"),
        ("", "schedule is empty"),
        ("@fortnightly", "unknown macro '@fortnightly'"),
        ("@every 0s", "the interval must be longer than zero"),
        ("@every 36501d", "the interval must be at most 36500d"),
        ("@every 99999999999d", "the interval must be at most 36500d"),  # past timedelta's range
        ("@every", "write the interval as days, hours, minutes and seconds"),
        ("@every 5 minutes", "write the interval as days, hours, minutes and seconds"),
        ("@every 1m30h", "write the interval as days, hours, minutes and seconds"),
    ],
)
def test_malformed_schedules_are_refused_with_a_clear_message(text, message):
    with pytest.raises(ScheduleError, match=message.replace("*", r"\*")):
        parse_schedule(text)


def test_schedule_error_is_a_value_error():
    assert issubclass(ScheduleError, ValueError)


@pytest.mark.parametrize(
    "text, expression",
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("  30   2 * * *  ", "30 2 * * *"),
        ("0 9 * JAN-mar Mon-FRI", "0 9 * JAN-mar Mon-FRI"),
    ],
)
def test_macros_and_names_parse_to_cron(text, expression):
    assert parse_schedule(text).expression == expression


@pytest.mark.parametrize(
    "text, interval",
    [
        ("@every 30s", timedelta(seconds=30)),
        ("@every 5m", timedelta(minutes=5)),
        ("@every 1h30m", timedelta(hours=1, minutes=30)),
        ("@every 2d", timedelta(days=2)),
        ("@every 1d2h3m4s", timedelta(days=1, hours=2, minutes=3, seconds=4)),
    ],
)
def test_every_durations_parse(text, interval):
    assert parse_schedule(text).every == interval


def test_sunday_can_be_written_as_seven():
    assert next_fire("0 0 * * 7", "UTC", None, utc(2026, 5, 4)) == utc(2026, 5, 10)


@pytest.mark.parametrize(
    "field, weekdays",
    [
        ("mon-sun", {0, 1, 2, 3, 4, 5, 6}),
        ("MON-SUN", {0, 1, 2, 3, 4, 5, 6}),
        ("mon-0", {0, 1, 2, 3, 4, 5, 6}),
        ("thu-sun", {4, 5, 6, 0}),
        ("5-0", {5, 6, 0}),
        ("5-7", {5, 6, 0}),
        ("sat-sun", {6, 0}),
        ("7-0", {0}),
        ("sun-sun", {0}),
        ("mon-sun/2", {1, 3, 5, 0}),  # 1, 3, 5, 7 as cronie counts it
        ("sat-sun,wed", {6, 0, 3}),
    ],
)
def test_a_weekday_range_may_end_on_sunday_as_cronie_reads_it(field, weekdays):
    # cronie (docs/design.md §14): a range ending in 0 or sun ends on day 7.
    assert parse_schedule(f"0 9 * * {field}").weekdays == weekdays


def test_a_weekend_range_ending_on_sunday_fires_on_saturday_and_sunday():
    fires = next_fires("0 9 * * sat-sun", "UTC", None, utc(2026, 12, 4), 4)  # a Friday
    assert fires == [
        utc(2026, 12, 5, 9),
        utc(2026, 12, 6, 9),
        utc(2026, 12, 12, 9),
        utc(2026, 12, 13, 9),
    ]
    assert next_fires("0 9 * * 5-0", "UTC", None, utc(2026, 12, 3), 3) == [
        utc(2026, 12, 4, 9),
        utc(2026, 12, 5, 9),
        utc(2026, 12, 6, 9),
    ]


def test_a_weekday_range_ending_on_sunday_is_described_in_words():
    assert describe("0 9 * * mon-sun") == "At 09:00 AM, Monday through Sunday"
    assert describe("0 9 * * 5-0") == "At 09:00 AM, Friday through Sunday"


def test_day_of_month_or_day_of_week_when_both_are_restricted():
    # Vixie cron: the 13th, or any Friday.
    fires = next_fires("0 0 13 * 5", "UTC", None, utc(2026, 2, 1), 4)
    assert [f.day for f in fires] == [6, 13, 20, 27]


def test_describe_says_the_schedule_in_words():
    assert describe("30 2 * * *") == "At 02:30 AM"
    assert describe("0 9 * * 1-5") == "At 09:00 AM, Monday through Friday"
    assert describe("@every 1h30m") == "Every 1 hour 30 minutes"
    assert describe("@every 2d") == "Every 2 days"


# --- plain next fire -----------------------------------------------------------------


def test_next_fire_is_strictly_after():
    assert next_fire("0 * * * *", "UTC", None, utc(2026, 5, 4, 10)) == utc(2026, 5, 4, 11)
    assert next_fire("0 * * * *", "UTC", None, utc(2026, 5, 4, 9, 59, 59)) == utc(2026, 5, 4, 10)


def test_next_fire_answers_in_utc():
    found = next_fire("30 2 * * *", "Europe/Berlin", None, utc(2026, 5, 4))
    assert found == utc(2026, 5, 4, 0, 30)
    assert found.tzinfo is UTC


def test_leap_day_schedule_fires_every_four_years():
    fires = next_fires("0 0 29 2 *", "UTC", None, utc(2026, 1, 1), 3)
    assert fires == [utc(2028, 2, 29), utc(2032, 2, 29), utc(2036, 2, 29)]


def test_leap_day_schedule_with_that_day_blocked_waits_for_the_next_leap_year():
    calendar = CalendarRules(exclude=(Period(date(2028, 2, 29), date(2028, 2, 29), "audit"),))
    assert next_fire("0 0 29 2 *", "UTC", calendar, utc(2027, 6, 1)) == utc(2032, 2, 29)
    # From 2026 on, 2032 lies beyond the five-year horizon.
    assert next_fire("0 0 29 2 *", "UTC", calendar, utc(2026, 1, 1)) is None


def test_every_is_anchored_on_after():
    after = utc(2026, 5, 4, 10, 0, 7)
    assert next_fire("@every 90s", "UTC", None, after) == after + timedelta(seconds=90)
    assert next_fires("@every 1h30m", "UTC", None, after, 2) == [
        after + timedelta(hours=1, minutes=30),
        after + timedelta(hours=3),
    ]


def test_impossible_date_never_fires():
    assert next_fire("0 0 30 2 *", "UTC", None, utc(2026, 1, 1)) is None
    assert never_fires_reason("0 0 30 2 *", "UTC", None, utc(2026, 1, 1)) == (
        "never fires: schedule '0 0 30 2 *' has no occurrence within 5 years"
    )


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        next_fire("* * * * *", "UTC", None, datetime(2026, 1, 1))
    with pytest.raises(ScheduleError, match="not a known IANA timezone"):
        next_fire("* * * * *", "Mars/Base", None, utc(2026, 1, 1))
    with pytest.raises(ValueError, match="unknown calendar policy"):
        next_fire("* * * * *", "UTC", None, utc(2026, 1, 1), "later")


# --- DST: Debian rule ------------------------------------------------------------------


def test_berlin_fall_back_fires_a_fixed_time_job_once():
    # 25 Oct 2026: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    assert fires_on_day("30 2 * * *", BERLIN, date(2026, 10, 25)) == [utc(2026, 10, 25, 0, 30)]


def test_berlin_spring_forward_fires_a_missing_time_when_the_gap_ends():
    # 29 Mar 2026: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    assert fires_on_day("30 2 * * *", BERLIN, date(2026, 3, 29)) == [utc(2026, 3, 29, 1, 0)]
    assert next_fire("30 2 * * *", BERLIN, None, utc(2026, 3, 29, 1, 0)) == utc(2026, 3, 30, 0, 30)


def test_fixed_time_jobs_around_the_gap_keep_their_own_times():
    assert fires_on_day("0 3 * * *", BERLIN, date(2026, 3, 29)) == [utc(2026, 3, 29, 1, 0)]
    assert fires_on_day("59 1 * * *", BERLIN, date(2026, 3, 29)) == [utc(2026, 3, 29, 0, 59)]
    assert fires_on_day("0 2 * * *", BERLIN, date(2026, 10, 25)) == [utc(2026, 10, 25, 0, 0)]


def test_a_minute_wildcard_runs_in_both_passes_of_a_repeated_hour():
    # Debian cron (docs/design.md §14): a minute field starting with `*` is
    # not a fixed time of day. 25 Oct 2026: 02:00-02:59 happens in CEST
    # (00:00-00:59 UTC) and again in CET (01:00-01:59 UTC).
    fires = fires_on_day("* 2 * * *", BERLIN, date(2026, 10, 25))
    assert len(fires) == 120
    assert fires == [utc(2026, 10, 25, 0, 0) + timedelta(minutes=m) for m in range(120)]
    fires = fires_on_day("*/15 2 * * *", BERLIN, date(2026, 10, 25))
    assert fires == [utc(2026, 10, 25, h, m) for h in (0, 1) for m in (0, 15, 30, 45)]


def test_a_minute_wildcard_in_the_first_pass_fires_again_in_the_second():
    first_pass_end = utc(2026, 10, 25, 0, 45)  # 02:45 CEST
    assert next_fire("*/15 2 * * *", BERLIN, None, first_pass_end) == utc(2026, 10, 25, 1, 0)


def test_a_minute_wildcard_does_not_run_in_a_skipped_hour():
    # 29 Mar 2026: 02:00 CET jumps to 03:00 CEST; 02:xx never happens, and
    # cron runs wildcard jobs only at wall times that exist.
    assert fires_on_day("* 2 * * *", BERLIN, date(2026, 3, 29)) == []
    assert fires_on_day("*/5 2 * * *", BERLIN, date(2026, 3, 29)) == []
    assert next_fire("* 2 * * *", BERLIN, None, utc(2026, 3, 28, 23)) == utc(2026, 3, 30, 0, 0)


def test_a_minute_wildcard_follows_absolute_time_in_new_york():
    # 1 Nov 2026: 02:00 EDT falls back to 01:00 EST; 01:xx happens twice.
    fires = fires_on_day("*/30 1 * * *", NEW_YORK, date(2026, 11, 1))
    # 01:00 and 01:30 EDT (05:xx UTC), then again in EST (06:xx UTC).
    assert fires == [utc(2026, 11, 1, h, m) for h in (5, 6) for m in (0, 30)]


def test_a_minute_field_of_every_minute_not_starting_with_a_star_is_a_fixed_time():
    # cron's rule reads how the field is written: `0-59` is not `*`.
    assert len(fires_on_day("0-59 2 * * *", BERLIN, date(2026, 10, 25))) == 60
    assert fires_on_day("0-59 2 * * *", BERLIN, date(2026, 3, 29)) == [utc(2026, 3, 29, 1, 0)]
    assert parse_schedule("0-59 2 * * *").fixed_time
    assert not parse_schedule("*/5 2 * * *").fixed_time
    assert not parse_schedule("* 2 * * *").fixed_time


def test_hourly_jobs_follow_absolute_time_through_both_transitions():
    assert len(fires_on_day("0 * * * *", BERLIN, date(2026, 3, 29))) == 23
    fall = fires_on_day("0 * * * *", BERLIN, date(2026, 10, 25))
    assert len(fall) == 25
    assert all(b - a == timedelta(hours=1) for a, b in zip(fall, fall[1:], strict=False))


def test_every_second_hour_is_a_fixed_time_of_day():
    spring = fires_on_day("0 */2 * * *", BERLIN, date(2026, 3, 29))
    assert len(spring) == 12
    assert spring[1] == utc(2026, 3, 29, 1, 0)  # 02:00 did not exist: 03:00 CEST
    fall = fires_on_day("0 */2 * * *", BERLIN, date(2026, 10, 25))
    assert len(fall) == 12
    assert fall[1:3] == [utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 3, 0)]  # 02:00 once


def test_an_hour_field_covering_every_hour_is_absolute_time_like_a_star():
    assert len(fires_on_day("0 0-23 * * *", BERLIN, date(2026, 10, 25))) == 25
    assert len(fires_on_day("0 */1 * * *", BERLIN, date(2026, 3, 29))) == 23


def test_half_hourly_job_steps_over_the_gap_in_absolute_time():
    fires = next_fires("*/30 * * * *", BERLIN, None, utc(2026, 3, 29, 0, 0), 3)
    assert fires == [utc(2026, 3, 29, 0, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 1, 30)]


def test_new_york_spring_forward_and_fall_back():
    # 8 Mar 2026: 02:00 EST -> 03:00 EDT. 1 Nov 2026: 02:00 EDT -> 01:00 EST.
    assert fires_on_day("30 2 * * *", NEW_YORK, date(2026, 3, 8)) == [utc(2026, 3, 8, 7, 0)]
    assert fires_on_day("30 1 * * *", NEW_YORK, date(2026, 11, 1)) == [utc(2026, 11, 1, 5, 30)]
    assert fires_on_day("30 1 * * *", NEW_YORK, date(2026, 11, 2)) == [utc(2026, 11, 2, 6, 30)]


def test_sydney_dst_ends_in_april_and_starts_in_october():
    # 5 Apr 2026: 03:00 AEDT -> 02:00 AEST. 4 Oct 2026: 02:00 AEST -> 03:00 AEDT.
    assert fires_on_day("30 2 * * *", SYDNEY, date(2026, 4, 5)) == [utc(2026, 4, 4, 15, 30)]
    assert fires_on_day("30 2 * * *", SYDNEY, date(2026, 10, 4)) == [utc(2026, 10, 3, 16, 0)]
    assert len(fires_on_day("15 * * * *", SYDNEY, date(2026, 4, 5))) == 25


def test_fixed_time_job_after_the_first_pass_does_not_fire_in_the_second():
    first_pass = utc(2026, 10, 25, 0, 30)  # 02:30 CEST
    assert next_fire("30 2 * * *", BERLIN, None, first_pass) == utc(2026, 10, 26, 1, 30)


# --- calendars -------------------------------------------------------------------------

FREEZE = CalendarRules(
    timezone="Europe/Berlin",
    exclude=(Period(date(2026, 12, 21), date(2027, 1, 10), "Christmas freeze"),),
    name="freeze",
)
FREEZE_STARTS = at(BERLIN, 2026, 12, 21, 0, 0)


@pytest.mark.parametrize(
    "schedule, expected",
    [
        ("* * * * *", at(BERLIN, 2027, 1, 11, 0, 0)),
        ("*/5 * * * *", at(BERLIN, 2027, 1, 11, 0, 0)),
        ("0 * * * *", at(BERLIN, 2027, 1, 11, 0, 0)),
        ("30 2 * * *", at(BERLIN, 2027, 1, 11, 2, 30)),
        ("0 9 * * 1-5", at(BERLIN, 2027, 1, 11, 9, 0)),
        ("0 0 1 * *", at(BERLIN, 2027, 2, 1, 0, 0)),
        ("@daily", at(BERLIN, 2027, 1, 11, 0, 0)),
        ("@weekly", at(BERLIN, 2027, 1, 17, 0, 0)),
        ("@monthly", at(BERLIN, 2027, 2, 1, 0, 0)),
        ("@yearly", at(BERLIN, 2028, 1, 1, 0, 0)),
        ("@every 5m", at(BERLIN, 2027, 1, 11, 0, 0)),
        ("@every 1h30m", at(BERLIN, 2027, 1, 11, 0, 0)),
        ("@every 11m", at(BERLIN, 2027, 1, 11, 0, 10)),  # 30,250 minutes after the anchor
        ("@every 2d", at(BERLIN, 2027, 1, 12, 0, 0)),
    ],
)
def test_it_advances_past_christmas_block(schedule, expected):
    assert next_fire(schedule, BERLIN, FREEZE, FREEZE_STARTS) == expected


def test_schedule_runs_as_usual_up_to_the_christmas_block():
    before = at(BERLIN, 2026, 12, 20, 23, 58)
    assert next_fires("* * * * *", BERLIN, FREEZE, before, 2) == [
        at(BERLIN, 2026, 12, 20, 23, 59),
        at(BERLIN, 2027, 1, 11, 0, 0),
    ]


def test_christmas_block_with_defer_fires_once_when_it_ends():
    after = at(BERLIN, 2026, 12, 18, 10, 0)  # Friday, after the 09:00 run
    fires = next_fires("0 9 * * 1-5", BERLIN, FREEZE, after, 3, policy="defer")
    assert fires == [
        at(BERLIN, 2027, 1, 11, 0, 0),  # fifteen blocked weekday runs, coalesced
        at(BERLIN, 2027, 1, 11, 9, 0),
        at(BERLIN, 2027, 1, 12, 9, 0),
    ]


def test_skip_and_defer_differ_on_a_weekend_run():
    workdays = CalendarRules(timezone="Europe/Berlin", weekdays=WORKDAYS, name="workdays")
    friday = at(BERLIN, 2026, 5, 8, 12, 0)
    assert next_fire("0 10 * * *", BERLIN, workdays, friday, "skip") == at(BERLIN, 2026, 5, 11, 10)
    assert next_fire("0 10 * * *", BERLIN, workdays, friday, "defer") == at(BERLIN, 2026, 5, 11, 0)


def test_every_keeps_its_grid_when_skipping_blocked_time():
    office = CalendarRules(window_start=time(9), window_end=time(17))
    after = utc(2026, 5, 4, 16, 50)
    # 16:50 + 39 x 25 minutes: the first grid point inside the next window.
    assert next_fire("@every 25m", "UTC", office, after) == utc(2026, 5, 5, 9, 5)


def test_calendar_in_another_timezone_than_the_job():
    berlin_workdays = CalendarRules(timezone="Europe/Berlin", weekdays=WORKDAYS, name="wd")
    # Friday 20:00 New York is Saturday 02:00 Berlin: blocked.
    after = at(NEW_YORK, 2026, 5, 8, 19, 0)
    assert next_fire("0 20 * * *", NEW_YORK, berlin_workdays, after) == at(
        NEW_YORK, 2026, 5, 10, 20, 0
    )


def test_weekday_calendar_with_a_saturday_cron_never_fires_and_says_so():
    workdays = CalendarRules(timezone="Europe/Berlin", weekdays=WORKDAYS, name="workdays")
    now = utc(2026, 5, 4)
    assert next_fire("0 9 * * 6", BERLIN, workdays, now) is None
    assert never_fires_reason("0 9 * * 6", BERLIN, workdays, now) == (
        "never fires: schedule '0 9 * * 6' never meets calendar 'workdays' within 5 years"
    )
    assert never_fires_reason("0 9 * * 6", BERLIN, workdays, now, policy="defer") is None


def test_never_fires_horizon_is_configurable():
    calendar = CalendarRules(
        include=(Period(date(2029, 6, 1), date(2029, 6, 30), "window"),), name="late"
    )
    now = utc(2026, 5, 4)
    assert never_fires_reason("0 9 * * *", "UTC", calendar, now, horizon_years=2) == (
        "never fires: calendar 'late' allows no time within 2 years"
    )
    assert never_fires_reason("0 9 * * *", "UTC", calendar, now, horizon_years=5) is None


def test_window_never_meeting_the_fire_time_is_reported():
    evenings = CalendarRules(
        window_start=time(18),
        window_end=time(22),
        name="evenings",
    )
    reason = never_fires_reason("0 9 * * *", "UTC", evenings, utc(2026, 5, 4))
    assert (
        reason == "never fires: schedule '0 9 * * *' never meets calendar 'evenings' within 5 years"
    )
