"""Timezone arithmetic on aware instants: local wall times, DST gaps and
folds, offset transitions. Shared by calendars/rules.py and scheduler/jobs/cron.py.

datetime.replace() is several times slower than combine(); these helpers sit
on the hot path of every calendar jump.
"""

import functools
import zoneinfo
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import cast

ONE_DAY = timedelta(days=1)
MIDNIGHT = time(0, 0)
# Offsets never change twice within a few hours, so sampling every 6 hours
# finds every transition; a bisection then pins it to the second.
_SAMPLE_STEP = 6 * 3600

# (instant, offset before, offset after) of one change of a zone's UTC offset.
Transition = tuple[datetime, timedelta, timedelta]


class RulesError(ValueError):
    """Calendar data that cannot describe allowed time (bad timezone, period, ...)."""


@functools.lru_cache(maxsize=256)
def get_zone(name: str | zoneinfo.ZoneInfo) -> zoneinfo.ZoneInfo:
    """A ZoneInfo for an IANA name, or RulesError with a message a person understands."""
    if isinstance(name, zoneinfo.ZoneInfo):
        return name
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise RulesError(
            f"{name!r} is not a known IANA timezone (for example Europe/Berlin or UTC)."
        ) from None


def to_utc(t: datetime) -> datetime:
    if t.tzinfo is None:
        raise RulesError(f"{t.isoformat()} has no timezone; pass an aware datetime.")
    return t.astimezone(UTC)


def wall(zone: tzinfo, t: datetime) -> datetime:
    """The naive local wall time of instant `t` in `zone`."""
    local = t.astimezone(zone)
    return datetime.combine(local.date(), local.time())


def as_utc(naive: datetime) -> datetime:
    """The aware UTC instant with the same fields as `naive`."""
    return datetime.combine(naive.date(), naive.time(), UTC)


def _offset_at(zone: tzinfo, epoch: int) -> timedelta:
    # An aware instant always has an offset.
    return cast(timedelta, datetime.fromtimestamp(epoch, zone).utcoffset())


@functools.lru_cache(maxsize=4096)
def _transitions_in_year(zone: tzinfo, year: int) -> tuple[Transition, ...]:
    """(instant, offset before, offset after) for each offset change in `year` (UTC)."""
    start = int(datetime(year, 1, 1, tzinfo=UTC).timestamp())
    end = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())
    found: list[Transition] = []
    lo, lo_off = start - _SAMPLE_STEP, _offset_at(zone, start - _SAMPLE_STEP)
    for hi in range(start, end + _SAMPLE_STEP, _SAMPLE_STEP):
        hi_off = _offset_at(zone, hi)
        if hi_off != lo_off:
            a, b = lo, hi  # offset(a) == lo_off, offset(b) != lo_off
            while b - a > 1:
                mid = (a + b) // 2
                if _offset_at(zone, mid) == lo_off:
                    a = mid
                else:
                    b = mid
            if start <= b < end:
                found.append((datetime.fromtimestamp(b, UTC), lo_off, _offset_at(zone, b)))
        lo, lo_off = hi, hi_off
    return tuple(found)


def next_transition(zone: tzinfo, t: datetime) -> Transition | None:
    """The first offset change strictly after `t`, as (instant, before, after), or None.

    Only the current and the next year are searched; callers treat None as
    "no change before 1 January of t.year + 2" (see `segment_end`).
    """
    for year in (t.year, t.year + 1):
        for tr in _transitions_in_year(zone, year):
            if tr[0] > t:
                return tr
    return None


def last_transition(zone: tzinfo, t: datetime) -> Transition | None:
    """The last offset change at or before `t` (this year or last), or None."""
    for year in (t.year, t.year - 1):
        for tr in reversed(_transitions_in_year(zone, year)):
            if tr[0] <= t:
                return tr
    return None


def segment_end(zone: tzinfo, t: datetime) -> datetime:
    """The first instant after `t` where the zone's offset may change.

    A real transition, or a year boundary standing in for "none soon", so
    loops over constant-offset segments always move forward.
    """
    tr = next_transition(zone, t)
    return tr[0] if tr else datetime(t.year + 2, 1, 1, tzinfo=UTC)


def _fold_offsets(zone: tzinfo, naive: datetime) -> tuple[timedelta, timedelta]:
    """The UTC offsets zoneinfo gives `naive` with fold=0 and fold=1."""
    d, t = naive.date(), naive.time()
    # A zone gives every wall time an offset (None only for a naive tzinfo).
    return cast(timedelta, zone.utcoffset(datetime.combine(d, t.replace(fold=0)))), cast(
        timedelta, zone.utcoffset(datetime.combine(d, t.replace(fold=1)))
    )


def instants_with_wall(zone: tzinfo, naive: datetime) -> list[datetime]:
    """All instants whose local wall time is `naive`: none (gap), one, or two (fold)."""
    first, second = _fold_offsets(zone, naive)
    if first == second:  # the usual case: exactly one instant
        return [as_utc(naive - first)]
    candidates = sorted({as_utc(naive - first), as_utc(naive - second)})
    return [t for t in candidates if wall(zone, t) == naive]


def resolve_wall(zone: tzinfo, naive: datetime) -> datetime:
    """The first instant whose wall time is `naive`; in a DST gap, the end of the gap."""
    hits = instants_with_wall(zone, naive)
    if hits:
        return hits[0]
    before_gap = min(as_utc(naive - offset) for offset in _fold_offsets(zone, naive))
    # A gap is a transition, so one follows the instant before it.
    return cast(Transition, next_transition(zone, before_gap))[0]


def local_midnight(zone: tzinfo, day: date) -> datetime:
    return resolve_wall(zone, datetime.combine(day, MIDNIGHT))


def add_years(t: datetime, years: int) -> datetime:
    try:
        return t.replace(year=t.year + years)
    except ValueError:  # 29 February
        return t.replace(year=t.year + years, day=28)
