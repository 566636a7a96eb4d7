"""When a job fires: its schedule's instants on its clock, its calendar and
policy applied, its jitter added (docs/design.md §3). Job's methods of the
same names delegate here; the math itself is scheduler.jobs.cron.

Pure but for the job's calendar, which `calendar_rules()` reads once per job.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from django.conf import settings

from calendars.rules import CalendarRules
from calendars.zones import get_zone
from scheduler.jobs.cron import never_fires_reason, next_fire, parse_schedule


class Firing(Protocol):
    """What these functions read of a job (scheduler.jobs.models.Job)."""

    name: str
    schedule: str
    timezone: str
    calendar_policy: str
    next_run_at: datetime | None
    paused_at: datetime | None
    paused_until: datetime | None
    DEFER: str

    @property
    def offset(self) -> timedelta: ...

    def calendar_rules(self, shared: dict[int, CalendarRules] | None = None) -> Any: ...

    def next_fire_after(
        self, after: datetime, blocked: list[datetime] | None = None
    ) -> datetime | None: ...

    def first_fire_after(
        self, after: datetime, blocked: list[datetime] | None = None
    ) -> datetime | None: ...

    def fire_after_pause(
        self, until: datetime, blocked: list[datetime] | None = None
    ) -> datetime | None: ...

    def wall_time(self, instant: datetime) -> datetime: ...


# Why a job without a schedule never fires by itself.
NO_SCHEDULE = "it has no schedule: it runs when a runner starts (run on register) or is triggered"


def next_fire_after(
    job: Firing, after: datetime, blocked: list[datetime] | None = None
) -> datetime | None:
    """The first fire instant strictly after `after`, calendar applied
    (`blocked`: see `scheduler.jobs.cron.next_fire`). With `jitter`, the
    schedule's instant (the one the calendar judges) plus the job's offset.
    A job without a schedule (run on register only) has none."""
    if not job.schedule:
        return None
    offset = job.offset
    instant = next_fire(
        job.schedule,
        job.timezone,
        job.calendar_rules(),
        after - offset,
        job.calendar_policy,
        horizon_years=settings.CRONIQ_HORIZON_YEARS,
        blocked=blocked,
        key=job.name,
    )
    return instant + offset if instant is not None else None


def upcoming(
    job: Firing, after: datetime, count: int, blocked: list[datetime] | None = None
) -> list[datetime]:
    """Up to `count` instants this job fires strictly after `after`, calendar applied.

    The one answer to "when does this job fire next" for the admin, the
    dashboard and `next_runs`, counted as the loop counts: each instant
    is `next_fire_after` the one before, starting from the job's anchor
    (see `first_fire_after`). ScheduleError or RulesError when the stored
    schedule or calendar cannot be evaluated. `blocked`, a list, receives
    the candidates the calendar turned away before the last one returned.
    """
    fires: list[datetime] = []
    resumes = job.paused_until if job.paused_at else None
    if resumes is not None and resumes > after:
        instant = job.fire_after_pause(resumes, blocked)  # what the loop then does
    else:
        instant = job.first_fire_after(after, blocked)
    while instant is not None and len(fires) < count:
        fires.append(instant)
        if len(fires) < count:
            instant = job.next_fire_after(instant, blocked)
    return fires


def first_fire_after(
    job: Firing, after: datetime, blocked: list[datetime] | None = None
) -> datetime | None:
    """The first instant the job fires strictly after `after`.

    Cron instants are fixed points in time. An `@every` job fires on the
    grid of its next_run_at (anchored on its last scheduled instant), so
    counting from `after` would drift to "after + interval": the grid is
    followed forwards or backwards to the last point not after `after`.
    A job without next_run_at (paused, disabled) counts from `after`, as
    resuming it at `after` would.
    """
    if not job.schedule:
        return None
    every = parse_schedule(job.schedule, key=job.name).every
    if every is None or job.next_run_at is None:
        return job.next_fire_after(after, blocked)
    grid_point = job.next_run_at + ((after - job.next_run_at) // every) * every
    return job.next_fire_after(grid_point, blocked)


def fire_after_pause(
    job: Firing, until: datetime, blocked: list[datetime] | None = None
) -> datetime | None:
    """The first instant the job fires once a pause ends at `until`.

    A cron occurrence at `until` itself fires. An `@every` job counts
    from `until`, as an operator's resume at that instant would (counting
    from just before it would fire a microsecond early).
    """
    if not job.schedule:
        return None
    if parse_schedule(job.schedule, key=job.name).every is None:
        until -= timedelta(microseconds=1)  # next_fire_after is strictly after
    return job.next_fire_after(until, blocked)


def no_fires_reason(job: Firing, after: datetime) -> str:
    """Why `upcoming(after, ...)` is empty, in a sentence."""
    if not job.schedule:
        return NO_SCHEDULE
    reason = never_fires_reason(
        job.schedule,
        job.timezone,
        job.calendar_rules(),
        after,
        horizon_years=settings.CRONIQ_HORIZON_YEARS,
        policy=job.calendar_policy,
        key=job.name,
    )
    return reason or "no fire time within the horizon"


def due_instant(job: Firing, rules: CalendarRules | None) -> datetime | None:
    """next_run_at checked against the calendar `rules` as they are now.

    next_run_at was computed with the calendar of that moment; a blackout
    added since moves it to the next instant the calendar allows (`skip`)
    or to the end of the blackout (`defer`).
    """
    instant = job.next_run_at
    offset = job.offset  # the calendar judges the schedule's instant
    if instant is None or rules is None or rules.is_allowed(instant - offset):
        return instant
    if job.calendar_policy == job.DEFER:
        allowed: datetime | None = rules.next_allowed(instant - offset)
        return allowed + offset if allowed is not None else None
    return job.next_fire_after(instant)


def wall_time(job: Firing, instant: datetime) -> datetime:
    """An instant on the clock of the job's timezone, where its schedule is read."""
    return instant.astimezone(get_zone(job.timezone))


def wall_and_utc(job: Firing, instant: datetime) -> tuple[str, str | None]:
    """An instant as the admin and the dashboard show it: (on the job's
    clock, in UTC), e.g. ("Mon 2026-12-07 09:00:00 CET", "08:00:00 UTC").
    The UTC text drops the date on the same day and is None for a job in
    UTC; a timezone that no longer resolves shows UTC alone."""
    utc = instant.astimezone(UTC)
    try:
        wall = job.wall_time(instant)
    except ValueError:
        wall = utc
    if wall.tzname() == "UTC":
        return utc.strftime("%a %Y-%m-%d %H:%M:%S UTC"), None
    same_day = wall.date() == utc.date()
    return (
        wall.strftime("%a %Y-%m-%d %H:%M:%S %Z"),
        utc.strftime("%H:%M:%S UTC" if same_day else "%a %Y-%m-%d %H:%M:%S UTC"),
    )
