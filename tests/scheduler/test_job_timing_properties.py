"""A job's timing beyond one schedule (docs/design.md §14) against an oracle
that shares no code with Croniq's: `cronsim` (an independent evaluator of
Debian cron's rules) gives each schedule's instants on its own clock, and
plain Python takes their union (a sorted set), keeps what falls inside the
bounds and counts off `max_runs`. Croniq answers through `Job.upcoming`.

Schedules are drawn where Croniq and cron agree on which jobs run at a fixed
time of day (tests/scheduler/test_crontab_fire_times.py states the two known
differences: an hour field covering every hour without starting with `*`),
in zones with DST, from random instants and from instants just before a
clock change.
"""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from scheduler.models import Job

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "America/Santiago", "America/St_Johns"]
SPAN = timedelta(days=45)
CAP = 300  # instants per schedule, at most
PROPERTY_SETTINGS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def clock_changes(zone):
    """The instants of 2025 to 2027 where `zone`'s UTC offset changes."""
    tz, found = ZoneInfo(zone), []
    t = datetime(2025, 1, 1, tzinfo=UTC)
    while t < datetime(2028, 1, 1, tzinfo=UTC):
        later = t + timedelta(hours=6)
        if t.astimezone(tz).utcoffset() != later.astimezone(tz).utcoffset():
            found.append(later)
        t = later
    return found


CHANGES = sorted({change for zone in ZONES for change in clock_changes(zone)})


def field(lo, hi):
    number = st.integers(lo, hi)
    span = st.tuples(number, number).map(lambda ab: f"{min(ab)}-{max(ab)}")
    return st.one_of(
        number.map(str),
        span,
        st.lists(number, min_size=2, max_size=3, unique=True).map(
            lambda ns: ",".join(map(str, sorted(ns)))
        ),
        st.tuples(span, st.integers(1, 4)).map(lambda x: f"{x[0]}/{x[1]}"),
    )


MINUTES = st.one_of(field(0, 59), st.integers(2, 30).map(lambda k: f"*/{k}"))
HOURS = st.one_of(field(0, 23), st.just("*"))
DAYS = st.one_of(st.just("*"), st.just("*"), field(1, 28))
WEEKDAYS = st.one_of(st.just("*"), st.just("*"), field(0, 6))
CRON = st.tuples(MINUTES, HOURS, DAYS, st.just("*"), WEEKDAYS).map(" ".join)
SOURCE = st.tuples(CRON, st.sampled_from(ZONES))
STARTS = st.one_of(
    st.datetimes(datetime(2025, 1, 1), datetime(2027, 10, 1)).map(
        lambda t: t.replace(microsecond=0, tzinfo=UTC)
    ),
    st.tuples(st.sampled_from(CHANGES), st.integers(1, 72)).map(
        lambda x: x[0] - timedelta(hours=x[1], minutes=7)
    ),
)


def agreed(cron):
    """Whether cron and Croniq agree on the schedule's DST rule: not for an
    hour field that covers every hour without starting with `*`."""
    hour = cron.split()[1]
    return hour.startswith("*") or len(sim_hours(cron)) < 24


def sim_hours(cron):
    return CronSim(cron, datetime(2026, 1, 1, tzinfo=UTC)).hours


def oracle_instants(cron, zone, start, end):
    """cronsim's instants of one schedule, strictly after `start`, before `end`."""
    try:
        walk = CronSim(cron, start.astimezone(ZoneInfo(zone)))
    except CronSimError:
        return [], end
    found = []
    for instant in walk:
        at = instant.astimezone(UTC)
        if at >= end:
            return found, end
        found.append(at)
        if len(found) == CAP:
            return found, at  # known only up to here
    return found, end


def oracle(sources, start, at=(), not_before=None, not_after=None, max_runs=None):
    """(instants, known until): the union, bounded, counted off."""
    end, instants = start + SPAN, set()
    known = end
    for cron, zone in sources:
        found, until = oracle_instants(cron, zone, start, end)
        instants.update(found)
        known = min(known, until)
    instants.update(t for t in at if start < t < end)
    ordered = sorted(t for t in instants if t <= known)
    if not_before is not None:
        ordered = [t for t in ordered if t >= not_before]
    if not_after is not None:
        ordered = [t for t in ordered if t <= not_after]
    if max_runs is not None:
        ordered = ordered[:max_runs]
    return ordered, known


def croniq(job, start, known):
    fires = job.upcoming(start, 4 * CAP)
    return [t for t in fires if t <= known and t < start + SPAN]


def job_of(sources, **fields):
    first, *rest = sources
    return Job(
        name="property",
        command="true",
        schedule=first[0],
        timezone=first[1],
        schedules=[{"cron": cron, "timezone": zone} for cron, zone in rest],
        **fields,
    )


@PROPERTY_SETTINGS
@given(sources=st.lists(SOURCE, min_size=2, max_size=4), start=STARTS)
def test_the_union_fires_at_each_instant_of_any_schedule_once(sources, start):
    assume(all(agreed(cron) for cron, _ in sources))
    expected, known = oracle(sources, start)
    assert croniq(job_of(sources), start, known) == expected


@PROPERTY_SETTINGS
@given(
    sources=st.lists(SOURCE, min_size=1, max_size=3),
    start=STARTS,
    at=st.lists(st.integers(1, SPAN.total_seconds() // 60 - 1), max_size=5),
    bounds=st.tuples(
        st.integers(0, 30 * 24 * 60), st.one_of(st.none(), st.integers(1, 15 * 24 * 60))
    ),
    jitter_free=st.booleans(),
)
def test_no_occurrence_falls_outside_the_bounds(sources, start, at, bounds, jitter_free):
    assume(all(agreed(cron) for cron, _ in sources))
    not_before = start + timedelta(minutes=bounds[0])
    not_after = None if bounds[1] is None else not_before + timedelta(minutes=bounds[1])
    instants = [start + timedelta(minutes=m) for m in at]
    expected, known = oracle(sources, start, instants, not_before, not_after)
    job = job_of(
        sources,
        at=[t.isoformat() for t in instants],
        not_before=not_before,
        not_after=not_after,
    )
    assert croniq(job, start, known) == expected


@PROPERTY_SETTINGS
@given(
    sources=st.lists(SOURCE, min_size=1, max_size=3),
    start=STARTS,
    at=st.lists(st.integers(1, 7 * 24 * 60), max_size=3),
    max_runs=st.integers(1, 40),
    counted=st.integers(0, 45),
)
def test_max_runs_ends_the_job_after_its_runs_left(sources, start, at, max_runs, counted):
    assume(all(agreed(cron) for cron, _ in sources))
    instants = [start + timedelta(minutes=m) for m in at]
    left = max(max_runs - counted, 0)
    expected, known = oracle(sources, start, instants, max_runs=left)
    job = job_of(
        sources,
        at=[t.isoformat() for t in instants],
        max_runs=max_runs,
        scheduled_runs=counted,
    )
    found = croniq(job, start, known)
    assert found == expected
    assert job.completed == (counted >= max_runs)
