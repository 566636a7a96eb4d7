"""Schedules and their next fire instants, DST-correct and calendar-gated.

Pure: no database, no clock. Callers pass `after` (the last scheduled instant,
or now) and get aware UTC datetimes back. This module is the public face and
the calendar gate; what a schedule text means and when it falls, calendar
ignored, lives in scheduler/jobs/schedules/ (DST: its wall_time module).

Calendars never make us discard candidates one by one: from a blocked
candidate we ask the calendar for its next allowed instant and continue the
cron search from there.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from cron_descriptor import Options, get_description

from calendars.rules import DEFAULT_HORIZON_YEARS, CalendarRules
from calendars.zones import RulesError, add_years, get_zone, to_utc, wall
from scheduler.jobs.schedules.business_day import BusinessDay, business_day_next, months_short
from scheduler.jobs.schedules.errors import ScheduleError
from scheduler.jobs.schedules.hashed import uses_key
from scheduler.jobs.schedules.parsing import EVERY_RE, parse_schedule
from scheduler.jobs.schedules.schedule import Schedule, nearest_weekday
from scheduler.jobs.schedules.union import Timing
from scheduler.jobs.schedules.wall_time import raw_next

__all__ = [
    "DEFER",
    "EVERY_RE",
    "SKIP",
    "Schedule",
    "ScheduleError",
    "describe",
    "months_without_occurrence",
    "nearest_weekday",
    "never_fires_reason",
    "next_fire",
    "next_fire_of",
    "next_fires",
    "parse_schedule",
    "uses_key",
]

SKIP = "skip"
DEFER = "defer"
TINY = timedelta(microseconds=1)

ScheduleLike = str | Schedule
Zone = str | ZoneInfo


def next_fire(
    schedule: ScheduleLike,
    tz: Zone,
    calendar: CalendarRules | None,
    after: datetime,
    policy: str = SKIP,
    horizon_years: int | None = None,
    blocked: list[datetime] | None = None,
    key: str | None = None,
) -> datetime | None:
    """The first fire instant strictly after `after`, calendar applied, in UTC.

    `schedule` is text or a Schedule, `tz` an IANA name or ZoneInfo, `calendar`
    a CalendarRules or None. `@every` counts from `after` (pass the last
    scheduled instant). Policy `skip` moves on to the next occurrence inside
    allowed time; `defer` fires a blocked occurrence once at the first allowed
    instant after it. None when nothing fires within the horizon (5 years).
    `blocked`, a list, receives the candidates the calendar turned away on
    the way (one per blocked stretch crossed), for previews. `key`: see
    parse_schedule.
    """
    if policy not in (SKIP, DEFER):
        raise ValueError(f"unknown calendar policy {policy!r} (use skip or defer)")
    schedule = parse_schedule(schedule, key)
    zone = _as_zone(tz)
    after = _as_utc(after)
    limit: datetime = add_years(after, horizon_years or DEFAULT_HORIZON_YEARS)
    if schedule.business_day is not None:
        return _business_day_fire(
            schedule.business_day, zone, calendar, after, policy, limit, blocked
        )
    candidate = raw_next(schedule, zone, after, limit, anchor=after)
    if candidate is None or calendar is None:
        return candidate
    allowed: datetime | None
    if policy == DEFER:
        # Every occurrence before the next allowed instant is blocked too, so
        # they all coalesce into this one firing.
        allowed = calendar.next_allowed(candidate, horizon=limit)
        if allowed != candidate and blocked is not None:
            blocked.append(candidate)
        return allowed
    while candidate is not None:
        allowed = calendar.next_allowed(candidate, horizon=limit)
        if allowed != candidate and blocked is not None:
            blocked.append(candidate)
        if allowed is None or allowed == candidate:
            return allowed
        candidate = raw_next(schedule, zone, allowed - TINY, limit, anchor=after)
    return None


def next_fire_of(
    timing: Timing,
    calendar: CalendarRules | None,
    after: datetime,
    policy: str = SKIP,
    horizon_years: int | None = None,
    blocked: list[datetime] | None = None,
    key: str | None = None,
) -> datetime | None:
    """`next_fire` for a job's whole timing (scheduler.jobs.schedules.union):
    the first instant strictly after `after` that any of its sources gives,
    each gated by the calendar as `next_fire` gates it, inside its bounds.
    `blocked` receives the candidates turned away before that instant."""
    after = _as_utc(after)
    start = timing.start(after)
    if timing.not_after is not None and start >= timing.not_after:
        return None
    turned_away: list[datetime] | None = [] if blocked is not None else None
    found = [
        next_fire(
            source.schedule,
            source.zone,
            calendar,
            timing.since(source, start),
            policy,
            horizon_years,
            turned_away,
            key,
        )
        for source in timing.sources
    ]
    if timing.at:
        limit = add_years(start, horizon_years or DEFAULT_HORIZON_YEARS)
        found.append(_one_shot_fire(timing, calendar, start, policy, limit, turned_away))
    first = min((instant for instant in found if instant is not None), default=None)
    if blocked is not None and turned_away:
        blocked.extend(sorted({t for t in turned_away if first is None or t < first}))
    return timing.within(first)


def _one_shot_fire(
    timing: Timing,
    calendar: CalendarRules | None,
    after: datetime,
    policy: str,
    limit: datetime,
    blocked: list[datetime] | None,
) -> datetime | None:
    """The first one-shot instant after `after`, gated by the calendar: a
    blocked one is skipped (the search jumps past the blocked stretch) or
    deferred to the first allowed instant, as a schedule's would be."""
    index = timing.next_at(after)
    while index < len(timing.at):
        candidate = timing.at[index]
        if candidate > limit:
            return None
        if calendar is None:
            return candidate
        allowed: datetime | None = calendar.next_allowed(candidate, horizon=limit)
        if allowed == candidate:
            return candidate
        if blocked is not None:
            blocked.append(candidate)
        if allowed is None or policy == DEFER:
            return allowed
        index = timing.next_at(allowed - TINY)
    return None


def _business_day_fire(
    business_day: BusinessDay,
    zone: ZoneInfo,
    calendar: CalendarRules | None,
    after: datetime,
    policy: str,
    limit: datetime,
    blocked: list[datetime] | None,
) -> datetime | None:
    """`next_fire` for `@business_day`: the next occurrence, gated by the calendar."""
    candidate = business_day_next(business_day, zone, calendar, after, limit)
    while candidate is not None and calendar is not None:
        allowed: datetime | None = calendar.next_allowed(candidate, horizon=limit)
        if allowed == candidate:
            return candidate
        if blocked is not None:
            blocked.append(candidate)
        if allowed is None or policy == DEFER:
            return allowed
        candidate = business_day_next(business_day, zone, calendar, allowed - TINY, limit)
    return candidate


def next_fires(
    schedule: ScheduleLike,
    tz: Zone,
    calendar: CalendarRules | None,
    after: datetime,
    count: int,
    policy: str = SKIP,
    horizon_years: int | None = None,
    key: str | None = None,
) -> list[datetime]:
    """Up to `count` consecutive fire instants after `after` (each anchored on the previous)."""
    schedule = parse_schedule(schedule, key)
    zone = _as_zone(tz)
    found: list[datetime] = []
    while len(found) < count:
        fire = next_fire(schedule, zone, calendar, after, policy, horizon_years)
        if fire is None:
            break
        found.append(fire)
        after = fire
    return found


def never_fires_reason(
    schedule: ScheduleLike,
    tz: Zone,
    calendar: CalendarRules | None,
    now: datetime,
    horizon_years: int | None = None,
    policy: str = SKIP,
    key: str | None = None,
) -> str | None:
    """A sentence when the schedule never fires within the horizon, else None."""
    schedule = parse_schedule(schedule, key)
    years = horizon_years or DEFAULT_HORIZON_YEARS
    if next_fire(schedule, tz, calendar, now, policy, years) is not None:
        return None
    if calendar is None:
        return f"never fires: schedule '{schedule}' has no occurrence within {years} years"
    if calendar.next_allowed(now, horizon=add_years(to_utc(now), years)) is None:
        return f"never fires: calendar '{calendar.name}' allows no time within {years} years"
    return (
        f"never fires: schedule '{schedule}' never meets calendar '{calendar.name}' "
        f"within {years} years"
    )


def months_without_occurrence(
    schedule: ScheduleLike,
    tz: Zone,
    calendar: CalendarRules | None,
    after: datetime,
    until: datetime,
    key: str | None = None,
) -> list[tuple[date, int]]:
    """For `@business_day`: the months from `after`'s to `until`'s (on the job's
    clock) with fewer allowed days than N, as [(first day, days allowed)]; []
    for other schedules (`key`: the job's name, for the H forms)."""
    schedule = parse_schedule(schedule, key=key)
    business_day = schedule.business_day
    if business_day is None:
        return []
    zone = _as_zone(tz)
    first: date = wall(zone, _as_utc(after)).date()
    last: date = wall(zone, _as_utc(until)).date()
    return months_short(business_day, calendar, first, last)


# English with a 12-hour clock, whatever the process's locale: the describer
# otherwise reads it, and Python 3.12 reads C.UTF-8 as "C" (24-hour times).
DESCRIBED_IN = Options(locale_code="en_US", use_24hour_time_format=False)


def describe(schedule: ScheduleLike, key: str | None = None) -> str:
    """The schedule in words, e.g. "At 02:30 AM" or "Every 1 hour 30 minutes"
    (`H` forms as the minute or hour they resolve to for `key`)."""
    schedule = parse_schedule(schedule, key)
    if schedule.every is not None:
        return "Every " + _describe_interval(schedule.every)
    if schedule.business_day is not None:
        return schedule.business_day.describe()
    try:
        return str(get_description(schedule.expression, DESCRIBED_IN))
    except Exception:  # a describer gap must not break a page; the text still says it
        return schedule.expression


def _describe_interval(interval: timedelta) -> str:
    seconds = int(interval.total_seconds())
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
    return " ".join(parts)


def _as_zone(tz: Zone) -> ZoneInfo:
    try:
        zone: ZoneInfo = get_zone(tz)
    except RulesError as exc:
        raise ScheduleError(str(exc)) from None
    return zone


def _as_utc(t: datetime) -> datetime:
    if not isinstance(t, datetime) or t.tzinfo is None:
        raise ValueError("`after` must be a timezone-aware datetime")
    return t.astimezone(UTC)
