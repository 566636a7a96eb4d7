"""Property tests: next_fire agrees with an oracle that walks minute by minute.

The oracle decides "does the job fire at this minute" from the Debian rule as
docs/design.md §3 states it, using zoneinfo's own fold resolution, and asks the
calendar oracle from tests/calendars/strategies.py whether the minute is
allowed. It shares no code with the segment walk in scheduler/jobs/cron.py.
"""

from datetime import UTC, timedelta
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.jobs.cron import next_fire, parse_schedule
from tests.calendars.strategies import (
    ANCHORS,
    THREE_DAYS,
    TIMEZONES,
    calendars,
    instants,
    oracle_allowed,
)

PROPERTY_SETTINGS = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
ONE_MINUTE = timedelta(minutes=1)
WALK = timedelta(minutes=THREE_DAYS)


def _field(lo, hi, star_weight):
    single = st.integers(lo, hi).map(str)
    pair = st.lists(st.integers(lo, hi), min_size=2, max_size=3, unique=True).map(
        lambda v: ",".join(map(str, v))
    )
    span = st.tuples(st.integers(lo, hi), st.integers(lo, hi)).map(sorted)
    ranged = span.map(lambda ab: f"{ab[0]}-{ab[1]}")
    stepped = st.tuples(span, st.integers(1, 4)).map(lambda x: f"{x[0][0]}-{x[0][1]}/{x[1]}")
    every = st.integers(2, max(2, (hi - lo) // 2)).map(lambda k: f"*/{k}")
    return st.one_of([st.just("*")] * star_weight + [single, pair, ranged, stepped, every])


# The hour field leans on 1-3, where every DST change of the test zones happens.
hour_field = st.one_of(
    _field(0, 23, 2), st.sampled_from(["1", "2", "3", "1-3", "2,3", "0-2/2", "*/3"])
)
cron_schedules = st.tuples(
    _field(0, 59, 1),
    hour_field,
    _field(1, 31, 12),
    _field(1, 12, 16),
    _field(0, 7, 4),
).map(" ".join)
every_schedules = st.sampled_from(
    ["@every 30s", "@every 7m", "@every 45m", "@every 1h30m", "@every 5h", "@every 1d"]
)
schedules = st.one_of(cron_schedules, cron_schedules, every_schedules, st.just("@daily"))


def _wall(zone, t):
    return t.astimezone(zone).replace(tzinfo=None)


def _matches(schedule, w):
    if (
        w.minute not in schedule.minutes
        or w.hour not in schedule.hours
        or w.month not in schedule.months
    ):
        return False
    dom = w.day in schedule.days
    dow = w.isoweekday() % 7 in schedule.weekdays
    return (dom and dow) if (schedule.dom_star or schedule.dow_star) else (dom or dow)


def _fires_at(schedule, zone, m):
    """Whether a cron job fires at UTC minute m, by the Debian rule."""
    w = _wall(zone, m)
    # Absolute time (docs/design.md §3, §14): the hour field covers every
    # hour, or the minute field starts with `*` as written (cron's MIN_STAR).
    if schedule.hour_star or schedule.text.split()[0].startswith("*"):
        return _matches(schedule, w)  # absolute time: every real minute that matches
    first_occurrence = w.replace(tzinfo=zone, fold=0).astimezone(UTC) == m
    if first_occurrence and _matches(schedule, w):
        return True
    before = _wall(zone, m - ONE_MINUTE)
    skipped = before + ONE_MINUTE
    while skipped < w:  # m ends a gap: wall times inside it fire now
        if _matches(schedule, skipped):
            return True
        skipped += ONE_MINUTE
    return False


def _occurrences(schedule, zone, after):
    """Raw fire instants in (after, after + WALK], calendar ignored."""
    if schedule.every is not None:
        t = after + schedule.every
        while t <= after + WALK:
            yield t
            t += schedule.every
        return
    m = after.replace(second=0, microsecond=0) + ONE_MINUTE
    while m <= after + WALK:
        if _fires_at(schedule, zone, m):
            yield m
        m += ONE_MINUTE


def _first_allowed_from(calendar, t, schedule):
    """First instant >= t the calendar allows, walking the grid allowed time changes on."""
    end = t + WALK
    if oracle_allowed(calendar, t):
        return t
    m = t.replace(second=0, microsecond=0) + ONE_MINUTE
    while m <= end:
        if oracle_allowed(calendar, m):
            return m
        m += ONE_MINUTE
    return None


def oracle_next_fire(schedule, zone, calendar, after, policy):
    for occurrence in _occurrences(schedule, zone, after):
        if calendar is None or oracle_allowed(calendar, occurrence):
            return occurrence
        if policy == "defer":
            return _first_allowed_from(calendar, occurrence, schedule)
    return None


@st.composite
def cases(draw):
    tz = draw(st.sampled_from(TIMEZONES))
    after = draw(instants(seconds=True, timezone=tz))
    calendar = None
    if draw(st.integers(0, 2)):
        anchor = draw(st.sampled_from([after.replace(second=0, microsecond=0), *ANCHORS]))
        calendar_tz = draw(st.sampled_from([tz, None]))
        calendar = draw(calendars(anchor, timezone=calendar_tz))
    return (
        parse_schedule(draw(schedules)),
        ZoneInfo(tz),
        calendar,
        after,
        draw(st.sampled_from(["skip", "defer"])),
    )


@PROPERTY_SETTINGS
@given(cases())
def test_next_fire_equals_a_minute_by_minute_oracle(case):
    schedule, zone, calendar, after, policy = case
    expected = oracle_next_fire(schedule, zone, calendar, after, policy)
    found = next_fire(schedule, zone, calendar, after, policy)
    if expected is not None:
        assert found == expected
    else:
        assert found is None or found > after + WALK


@PROPERTY_SETTINGS
@given(cases())
def test_chained_fires_equal_every_oracle_fire_in_the_walk(case):
    # Chaining is how the scheduler uses next_fire: each fire becomes the next
    # `after`, which is what exposes a second firing inside a repeated hour.
    schedule, zone, calendar, after, _ = case
    expected = [
        o
        for o in _occurrences(schedule, zone, after)
        if calendar is None or oracle_allowed(calendar, o)
    ]
    found, t = [], after
    while True:
        t = next_fire(schedule, zone, calendar, t)
        if t is None or t > after + WALK:
            break
        found.append(t)
    assert found == expected
