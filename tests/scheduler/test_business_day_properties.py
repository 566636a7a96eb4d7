"""Property tests: `@business_day N HH:MM` agrees with a brute-force oracle.

The oracle walks the days of each month and asks, minute by minute, whether
the calendar oracle of tests/calendars/strategies.py allows any instant of the
day; it counts those days, places HH:MM on the Nth by walking UTC minutes
until the wall clock reaches it (the first of a repeated time, the end of a
gap), and gates the instant with the calendar oracle. It shares no code with
scheduler/jobs/cron.py or calendars/rules.py.
"""

import calendar as stdlib_calendar
import functools
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import holidays
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calendars.rules import CalendarRules
from scheduler.jobs.cron import next_fire
from tests.calendars.strategies import (
    ANCHORS,
    DST_CHANGES,
    TIMEZONES,
    calendars,
    instants,
    oracle_allowed,
    rarely,
    times,
    weekday_masks,
)

# As tests/scheduler/test_cron_properties.py.
PROPERTY_SETTINGS = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
ONE_MINUTE = timedelta(minutes=1)
MONTHS = 3  # the oracle looks this many months ahead of `after`
DEFER_WALK = timedelta(days=3)


# --- the oracle ----------------------------------------------------------------


@functools.cache
def _holidays(country, subdivision, year):
    return holidays.country_holidays(country, subdiv=subdivision or None, years=year)


def _is_dates(period):
    return not isinstance(period.start, datetime)


def _first_minute(zone, day):
    first = datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC)
    while (first - ONE_MINUTE).astimezone(zone).date() == day:
        first -= ONE_MINUTE
    while first.astimezone(zone).date() < day:
        first += ONE_MINUTE
    return first


def _date_blocked(rules, day):
    """The calendar's own weekdays, holidays or date blackouts rule out local date `day`."""
    if day.weekday() not in rules.weekdays:
        return True
    if rules.holiday_country and day in _holidays(
        rules.holiday_country, rules.holiday_subdivision, day.year
    ):
        return True
    return any(_is_dates(p) and p.start <= day <= p.end for p in rules.exclude)


def _surely_blocked(rules, day, start, end):
    """Whether the raw data rules out every instant of `day` ([start, end) in UTC)
    at a glance; False means "walk its minutes"."""
    if _date_blocked(rules, day):
        return True
    if any(not _is_dates(p) and p.start <= start and end <= p.end for p in rules.exclude):
        return True
    if rules.include and not any(
        (p.start <= day <= p.end) if _is_dates(p) else (p.start < end and start < p.end)
        for p in rules.include
    ):
        return True
    if rules.base is None:
        return False
    hours = (start + timedelta(hours=h) for h in range(26))
    touched = {t.astimezone(rules.base.zone).date() for t in hours if t < end}
    touched.add((end - ONE_MINUTE).astimezone(rules.base.zone).date())
    return all(_date_blocked(rules.base, d) for d in touched)


def _minutes(start, end):
    """The UTC minutes in [start, end): those where the test calendars' windows
    mostly open (:00, :15, :30, :45 and :59 on the wall) first, then the rest.
    The order only makes an allowed day show up sooner; every minute is asked."""
    for likely in (True, False):
        m = start
        while m < end:
            if (m.minute % 15 in (0, 14)) == likely:
                yield m
            m += ONE_MINUTE


def oracle_day_counts(rules, day):
    if rules is None:
        return day.weekday() < 5  # Monday to Friday
    start = _first_minute(rules.zone, day)
    end = _first_minute(rules.zone, day + timedelta(days=1))
    if _surely_blocked(rules, day, start, end):
        return False
    return any(oracle_allowed(rules, m) for m in _minutes(start, end))


def oracle_wall_instant(zone, day, at):
    """The first UTC minute whose wall time in `zone` reaches `day` at `at`."""
    naive = datetime.combine(day, at)
    m = naive.replace(tzinfo=zone).astimezone(UTC) - timedelta(hours=3)
    while m.astimezone(zone).replace(tzinfo=None) < naive:
        m += ONE_MINUTE
    return m


def _months_from(day, count):
    year, month = day.year, day.month
    for _ in range(count):
        yield year, month
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)


def oracle_occurrences(n, at, zone, rules, after):
    """(raw occurrences after `after` in the months walked, first day past them)."""
    start = after.astimezone(zone).date() - timedelta(days=1)
    found = []
    for year, month in _months_from(start, MONTHS + 1):
        days = [
            date(year, month, d) for d in range(1, stdlib_calendar.monthrange(year, month)[1] + 1)
        ]
        counted = [d for d in days if oracle_day_counts(rules, d)]
        if len(counted) >= abs(n):
            t = oracle_wall_instant(zone, counted[n - 1 if n > 0 else n], at)
            if t > after:
                found.append(t)
        beyond = days[-1] + timedelta(days=1)
    return found, beyond


def _first_allowed_from(rules, t):
    m = t
    while m <= t + DEFER_WALK:
        if oracle_allowed(rules, m):
            return m
        m += ONE_MINUTE
    return None


# --- cases -----------------------------------------------------------------------

numbers = st.one_of(
    st.integers(1, 4), st.integers(-4, -1), st.integers(-31, 31).filter(lambda n: n != 0)
)
hours = st.one_of(st.sampled_from([0, 1, 2, 3]), st.integers(0, 23))
walls = st.one_of(times, st.builds(time, hours, st.integers(0, 59)))


def schedule_text(n, at):
    return f"@business_day {n} {at:%H:%M}"


@st.composite
def random_cases(draw):
    tz = draw(st.sampled_from(TIMEZONES))
    after = draw(instants(seconds=True, timezone=tz))
    rules = None
    if draw(st.integers(0, 3)):
        anchor = draw(st.sampled_from([after.replace(second=0, microsecond=0), *ANCHORS]))
        rules = draw(calendars(anchor, timezone=draw(st.sampled_from([tz, None]))))
    return draw(numbers), draw(walls), ZoneInfo(tz), rules, after


# The wall hour each zone's offset changes in: a gap in spring, a fold in autumn.
CHANGE_HOURS = {
    "Europe/Berlin": [2],
    "America/New_York": [1, 2],
    "Australia/Sydney": [2],
    "America/Havana": [0],
}


@st.composite
def dst_day_cases(draw):
    """N picked so that the occurrence falls on a DST change, mostly in its hour."""
    tz = draw(st.sampled_from(sorted(DST_CHANGES)))
    change = draw(st.sampled_from(DST_CHANGES[tz])).date()
    last = stdlib_calendar.monthrange(change.year, change.month)[1]
    n = draw(st.sampled_from([change.day, change.day - last - 1]))
    rules = CalendarRules(timezone=tz, name="every day")
    if draw(rarely):
        rules = draw(calendars(datetime.combine(change, time(0), UTC), timezone=tz))
        rules = CalendarRules(**{**_window_and_periods(rules), "timezone": tz})
    after = datetime.combine(change, time(0), UTC) - timedelta(
        minutes=draw(st.integers(0, 40 * 24 * 60))
    )
    hour = draw(st.one_of(st.sampled_from(CHANGE_HOURS[tz]), st.integers(0, 3)))
    at = time(hour, draw(st.sampled_from([0, 1, 30, 59])))
    return n, at, ZoneInfo(tz), rules, after


@st.composite
def whole_day_cases(draw):
    """Calendars whose days are decided by weekdays, holidays, date periods and a
    base calendar's weekdays: how business days are mostly counted."""
    tz = draw(st.sampled_from(TIMEZONES))
    after = draw(instants(seconds=True, timezone=tz))
    anchor = after.replace(second=0, microsecond=0)
    drawn = draw(calendars(anchor, with_base=False, timezone=draw(st.sampled_from([tz, None]))))
    base = None
    if draw(st.booleans()):
        base = CalendarRules(
            timezone=draw(st.sampled_from(TIMEZONES)), weekdays=draw(weekday_masks), name="base"
        )
    rules = CalendarRules(
        timezone=drawn.timezone,
        weekdays=drawn.weekdays,
        holiday_country=drawn.holiday_country,
        holiday_subdivision=drawn.holiday_subdivision,
        exclude=tuple(p for p in drawn.exclude if not isinstance(p.start, datetime)),
        include=tuple(p for p in drawn.include if not isinstance(p.start, datetime)),
        base=base,
        name="whole days",
    )
    return draw(numbers), draw(walls), ZoneInfo(tz), rules, after


def _window_and_periods(rules):
    names = ("window_start", "window_end", "exclude", "include", "base", "name")
    return {name: getattr(rules, name) for name in names}


cases = st.one_of(random_cases(), dst_day_cases(), whole_day_cases())


# --- properties ------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(cases, st.sampled_from(["skip", "defer"]))
def test_next_fire_equals_the_brute_force_oracle(case, policy):
    n, at, zone, rules, after = case
    found = next_fire(schedule_text(n, at), zone, rules, after, policy)
    occurrences, beyond = oracle_occurrences(n, at, zone, rules, after)
    for t in occurrences:
        if rules is None or oracle_allowed(rules, t):
            assert found == t
            return
        if policy == "defer":
            expected = _first_allowed_from(rules, t)
            if expected is None:
                assert found is None or found > t + DEFER_WALK
            else:
                assert found == expected
            return
    # No occurrence the oracle saw fires: whatever fires lies past its months.
    assert found is None or found.astimezone(zone).date() >= beyond


@PROPERTY_SETTINGS
@given(cases)
def test_chained_fires_are_every_allowed_occurrence(case):
    # Chaining is how the scheduler uses next_fire: each fire is the next `after`.
    n, at, zone, rules, after = case
    occurrences, beyond = oracle_occurrences(n, at, zone, rules, after)
    expected = [t for t in occurrences if rules is None or oracle_allowed(rules, t)]
    found, t = [], after
    while True:
        t = next_fire(schedule_text(n, at), zone, rules, t)
        if t is None or t.astimezone(zone).date() >= beyond:
            break
        found.append(t)
    assert found == expected
