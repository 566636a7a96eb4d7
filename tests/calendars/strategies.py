"""Random calendars for the property tests, and a brute-force oracle for them.

The oracle reads the raw calendar data directly (local date inside a date
range, wall time inside a window) and shares no code with the interval
arithmetic in calendars/rules.py, so the two can disagree.
"""

import functools
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import holidays
from hypothesis import strategies as st

from calendars.periods import Period
from calendars.rules import CalendarRules

# UTC, three DST zones from the issue, a half-hour offset, and Havana, whose
# spring-forward swallows midnight itself.
TIMEZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Sydney",
    "Asia/Kolkata",
    "America/Havana",
]
HOLIDAYS = [("", ""), ("DE", "BY"), ("US", ""), ("GB", "")]
# Around DST changes of the zones above, Christmas, and an ordinary summer day.
ANCHORS = [
    datetime(2026, 3, 8, tzinfo=UTC),
    datetime(2026, 3, 29, tzinfo=UTC),
    datetime(2026, 4, 5, tzinfo=UTC),
    datetime(2026, 10, 4, tzinfo=UTC),
    datetime(2026, 10, 25, tzinfo=UTC),
    datetime(2026, 11, 1, tzinfo=UTC),
    datetime(2026, 12, 24, tzinfo=UTC),
    datetime(2026, 7, 15, tzinfo=UTC),
    datetime(2028, 2, 28, tzinfo=UTC),
]
THREE_DAYS = 3 * 24 * 60
# Local dates of each zone's offset changes in 2026.
DST_CHANGES = {
    "Europe/Berlin": [datetime(2026, 3, 29, tzinfo=UTC), datetime(2026, 10, 25, tzinfo=UTC)],
    "America/New_York": [datetime(2026, 3, 8, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)],
    "Australia/Sydney": [datetime(2026, 4, 5, tzinfo=UTC), datetime(2026, 10, 4, tzinfo=UTC)],
    "America/Havana": [datetime(2026, 3, 8, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)],
}


@st.composite
def instants(draw, seconds=False, timezone=None):
    """An aware UTC instant within three days of an interesting anchor.

    With a timezone, half of them fall in the days just before one of its
    offset changes, so a three-day walk from them crosses it.
    """
    changes = DST_CHANGES.get(timezone)
    if changes and draw(st.booleans()):
        change = draw(st.sampled_from(changes))
        t = change - timedelta(minutes=draw(st.integers(-12 * 60, 2 * 24 * 60)))
    else:
        anchor = draw(st.sampled_from(ANCHORS))
        t = anchor + timedelta(minutes=draw(st.integers(-THREE_DAYS, THREE_DAYS)))
    if seconds and draw(st.booleans()):
        t += timedelta(seconds=draw(st.integers(1, 59)))
    return t


# Hours 1-3 hold every DST change of the zones above, so draw them often.
hours = st.one_of(st.sampled_from([0, 1, 2, 3]), st.integers(0, 23))
times = st.builds(time, hours, st.sampled_from([0, 15, 30, 45, 59]))


# Mostly permissive masks, so the other rules get their turn at blocking.
weekday_masks = st.one_of(
    st.just(frozenset(range(7))),
    st.just(frozenset(range(5))),
    st.frozensets(st.integers(0, 6)),
)
rarely = st.integers(0, 3).map(lambda n: n == 0)


@st.composite
def periods(draw, anchor):
    label = draw(st.sampled_from(["", "freeze", "maintenance"]))
    if draw(st.booleans()):
        start = anchor.date() + timedelta(days=draw(st.integers(-20, 20)))
        return Period(start, start + timedelta(days=draw(st.integers(0, 400))), label)
    start = anchor + timedelta(minutes=draw(st.integers(-THREE_DAYS, THREE_DAYS)))
    return Period(start, start + timedelta(minutes=draw(st.integers(1, 10 * 24 * 60))), label)


@st.composite
def calendars(draw, anchor, with_base=True, timezone=None):
    """Random CalendarRules near `anchor`: weekday masks, holidays, window, periods, base."""
    window = None
    if draw(st.booleans()):
        window = draw(st.tuples(times, times).filter(lambda w: w[0] != w[1]))
    country, subdivision = draw(st.sampled_from(HOLIDAYS))
    return CalendarRules(
        timezone=timezone or draw(st.sampled_from(TIMEZONES)),
        weekdays=draw(weekday_masks),
        holiday_country=country,
        holiday_subdivision=subdivision,
        window_start=window[0] if window else None,
        window_end=window[1] if window else None,
        exclude=tuple(draw(st.lists(periods(anchor), max_size=3))),
        include=tuple(draw(st.lists(periods(anchor), max_size=2))),
        base=draw(calendars(anchor, with_base=False)) if with_base and draw(rarely) else None,
        name="random",
    )


@functools.cache
def _holidays(country, subdivision, year):
    return holidays.country_holidays(country, subdiv=subdivision or None, years=year)


def _in_period(period, t, local_date):
    if isinstance(period.start, datetime):
        return period.start <= t < period.end
    return period.start <= local_date <= period.end


def oracle_allowed(rules, t):
    """Whether `rules` allows `t`, read straight from the raw data."""
    local = t.astimezone(ZoneInfo(rules.timezone))
    day, wall_time = local.date(), local.time().replace(tzinfo=None)
    if day.weekday() not in rules.weekdays:
        return False
    if rules.holiday_country and day in _holidays(
        rules.holiday_country, rules.holiday_subdivision, day.year
    ):
        return False
    if rules.window_start is not None:
        start, end = rules.window_start, rules.window_end
        inside = start <= wall_time < end if start < end else wall_time >= start or wall_time < end
        if not inside:
            return False
    if any(_in_period(p, t, day) for p in rules.exclude):
        return False
    if rules.include and not any(_in_period(p, t, day) for p in rules.include):
        return False
    return rules.base is None or oracle_allowed(rules.base, t)


def minutes_from(t, count):
    """t, then each whole UTC minute after it: the instants where allowed time can change."""
    yield t
    first = t.replace(second=0, microsecond=0) + timedelta(minutes=1)
    for i in range(count):
        yield first + timedelta(minutes=i)
