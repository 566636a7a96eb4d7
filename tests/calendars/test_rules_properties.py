"""Property tests: the interval arithmetic agrees with a minute-by-minute oracle."""

from datetime import UTC, datetime, time, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.calendars.strategies import (
    ANCHORS,
    THREE_DAYS,
    TIMEZONES,
    calendars,
    instants,
    minutes_from,
    oracle_allowed,
)

PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
SCAN = timedelta(minutes=THREE_DAYS)
SAMPLES = 300


@st.composite
def calendar_and_instant(draw):
    tz = draw(st.sampled_from(TIMEZONES))
    t = draw(instants(seconds=True, timezone=tz))
    anchor = draw(st.sampled_from([t.replace(second=0, microsecond=0), *ANCHORS]))
    return draw(calendars(anchor, timezone=tz)), t


@PROPERTY_SETTINGS
@given(calendar_and_instant(), st.integers(0, 2000))
def test_is_allowed_agrees_with_the_raw_data(case, step):
    rules, t = case
    for probe in (t, t + timedelta(minutes=step), t - timedelta(minutes=7 * step)):
        assert rules.is_allowed(probe) == oracle_allowed(rules, probe), probe


@PROPERTY_SETTINGS
@given(calendar_and_instant())
def test_next_allowed_equals_a_brute_force_scan(case):
    rules, t = case
    expected = next(
        (m for m in minutes_from(t, THREE_DAYS) if oracle_allowed(rules, m)),
        None,
    )
    found = rules.next_allowed(t)
    if expected is not None:
        assert found == expected
        return
    # Nothing within the scanned range: whatever comes later must be a real
    # edge of allowed time, with blocked time all the way up to it.
    end = found if found is not None else t + timedelta(days=5 * 365)
    assert found is None or found > t + SCAN
    if found is not None:
        assert oracle_allowed(rules, found)
        assert not oracle_allowed(rules, found - timedelta(minutes=1))
    step = (end - t) / SAMPLES
    assert not any(oracle_allowed(rules, t + i * step) for i in range(SAMPLES))


@PROPERTY_SETTINGS
@given(calendar_and_instant())
def test_allowed_until_equals_a_brute_force_scan(case):
    rules, t = case
    start = rules.next_allowed(t, horizon=SCAN)
    if start is None:
        assert rules.allowed_until(t) == t
        return
    limit = start + SCAN
    expected = next(
        (m for m in minutes_from(start, THREE_DAYS) if m > start and not oracle_allowed(rules, m)),
        None,
    )
    assert rules.allowed_until(start, horizon=limit) == expected


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calendar_and_instant())
def test_day_status_says_allowed_exactly_when_some_minute_of_the_day_is(case):
    rules, t = case
    day = t.astimezone(rules.zone).date()
    midnight = datetime.combine(day, time(0), tzinfo=rules.zone).astimezone(UTC)
    minutes = (midnight + timedelta(minutes=i) for i in range(-120, 26 * 60))
    any_allowed = any(
        oracle_allowed(rules, m) for m in minutes if m.astimezone(rules.zone).date() == day
    )
    allowed, reason = rules.day_status(day)
    assert allowed == any_allowed
    assert rules.day_allowed(day) == any_allowed  # what @business_day counts
    assert (reason == "") == allowed
