"""When a job fires: its schedule's instants on its clock, its calendar and
policy applied, its jitter added (docs/design.md §3); with more schedules,
one-shot instants, bounds or a run limit, their union inside the bounds,
up to the limit (§14). Job's methods of the same names delegate here; the
math itself is scheduler.jobs.cron (and its schedules.union).

Pure but for the job's calendar, which `calendar_rules()` reads once per job.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Any, Protocol

from django.conf import settings

from calendars.rules import CalendarRules
from calendars.zones import get_zone
from core.instants import shown, shown_time
from scheduler.jobs.cron import (
    never_fires_reason,
    next_fire,
    next_fire_of,
    parse_schedule,
)
from scheduler.jobs.schedules.union import Source, Timing, instants


class Firing(Protocol):
    """What these functions read of a job (scheduler.jobs.models.Job)."""

    name: str
    schedule: str
    timezone: str
    schedules: list[Any]
    at: list[Any]
    not_before: datetime | None
    not_after: datetime | None
    max_runs: int | None
    calendar_policy: str
    next_run_at: datetime | None
    paused_at: datetime | None
    paused_until: datetime | None
    DEFER: str

    @property
    def runs_left(self) -> int | None: ...

    @property
    def timing(self) -> Timing | None: ...

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


def timing(job: Firing) -> Timing | None:
    """The job's schedules (each on its clock), one-shot instants and bounds
    as one Timing; None for a job with its `schedule` alone, which takes the
    path it always took. Built once per set of values (ScheduleError or
    RulesError when one cannot be read)."""
    schedules, at = job.schedules or [], job.at or []
    if not schedules and not at and job.not_before is None and job.not_after is None:
        return None
    key = (
        job.name, job.schedule, job.timezone, repr(schedules), repr(at),
        job.not_before, job.not_after,
    )  # fmt: skip
    cached = getattr(job, "_timing", None)
    if cached is None or cached[0] != key:
        cached = (key, build_timing(job, schedules, at))
        job._timing = cached  # type: ignore[attr-defined]
    built: Timing = cached[1]
    return built


def build_timing(job: Firing, schedules: list[Any], at: list[Any]) -> Timing:
    sources: list[tuple[Any, str]] = [(job.schedule, job.timezone)] if job.schedule else []
    for item in schedules:
        if isinstance(item, dict):
            sources.append((item.get("cron"), item.get("timezone") or job.timezone))
        else:
            sources.append((item, job.timezone))
    return Timing(
        tuple(Source(parse_schedule(text, key=job.name), get_zone(tz)) for text, tz in sources),
        instants(at),
        job.not_before,
        job.not_after,
    )


def next_fire_after(
    job: Firing, after: datetime, blocked: list[datetime] | None = None
) -> datetime | None:
    """The first fire instant strictly after `after`, calendar applied
    (`blocked`: see `scheduler.jobs.cron.next_fire`). With `jitter`, the
    schedule's instant (the one the calendar judges) plus the job's offset.
    A job without a schedule (run on register only) has none, nor a job
    that has had its `max_runs`."""
    if job.runs_left == 0:
        return None
    found = job.timing
    if found is not None:
        return next_fire_in(job, found, after, blocked)
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


def next_fire_in(
    job: Firing, found: Timing, after: datetime, blocked: list[datetime] | None
) -> datetime | None:
    """`next_fire_after` for a job with a Timing: the bounds judge the fire
    instants, so they move with the jitter the calendar does not see."""
    offset = job.offset
    instant = next_fire_of(
        found.shifted(offset),
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
    (see `first_fire_after`), up to its `max_runs`. ScheduleError or
    RulesError when the stored schedule or calendar cannot be evaluated.
    `blocked`, a list, receives the candidates the calendar turned away
    before the last one returned.
    """
    if count <= 0:
        return []
    return list(islice(fires(job, after, blocked, last=count), count))


def fires(
    job: Firing, after: datetime, blocked: list[datetime] | None = None, last: int | None = None
) -> Iterator[datetime]:
    """Every instant the job fires strictly after `after`, in order, as
    `upcoming` counts them; the forecast reads it as far as it needs.
    `last`: the caller stops after that many (no search past the last)."""
    resumes = job.paused_until if job.paused_at else None
    if resumes is not None and resumes > after:
        instant = job.fire_after_pause(resumes, blocked)  # what the loop then does
    else:
        instant = job.first_fire_after(after, blocked)
    left = runs_left_after(job, after)
    # Instants before next_run_at came due already: `max_runs` counted them.
    counted_from = job.next_run_at if job.paused_at is None else None
    given = 0
    while instant is not None:
        if left is not None and (counted_from is None or instant >= counted_from):
            if left == 0:
                return
            left -= 1
        yield instant
        given += 1
        if given == last:
            return
        instant = job.next_fire_after(instant, blocked)


def runs_left_after(job: Firing, after: datetime) -> int | None:
    """The occurrences the job may have after `after` (None: no limit):
    its `runs_left`, less those the loop will count first, its due
    instants from next_run_at up to `after`."""
    left = job.runs_left
    start = job.next_run_at
    if left is None or start is None or start > after or job.paused_at is not None:
        return left
    instant: datetime | None = start
    while instant is not None and instant <= after and left > 0:
        left -= 1
        instant = job.next_fire_after(instant)
    return left


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
    every = anchored_every(job)
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
    if anchored_every(job) is None:
        until -= timedelta(microseconds=1)  # next_fire_after is strictly after
    return job.next_fire_after(until, blocked)


def anchored_every(job: Firing) -> timedelta | None:
    """The interval of a job whose one schedule is `@every`, counted from
    its last instant; None for fixed instants (cron, `@business_day`, one-shot
    instants, and `@every` in a union, on its grid: schedules.union)."""
    found = job.timing
    if found is not None:
        return found.sources[0].schedule.every if found.alone else None
    if not job.schedule:
        return None
    return parse_schedule(job.schedule, key=job.name).every


def no_fires_reason(job: Firing, after: datetime) -> str:
    """Why `upcoming(after, ...)` is empty, in a sentence."""
    if job.runs_left == 0:
        return f"it has completed: its {job.max_runs} scheduled runs (max_runs) have come"
    found = job.timing
    if found is not None:
        return no_fires_in(job, found, after)
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


def no_fires_in(job: Firing, found: Timing, after: datetime) -> str:
    """`no_fires_reason` for a job with a Timing."""
    if found.empty:
        return NO_SCHEDULE
    if job.not_after is not None and job.not_after <= after:
        return f"its last allowed instant (not_after {job.not_after.isoformat()}) has passed"
    if not found.sources:
        if found.at[-1] + job.offset <= after:
            return "its one-shot instants (at) have all passed"
        return "its calendar blocks every one-shot instant (at) still to come"
    reasons = [
        never_fires_reason(
            source.schedule,
            source.zone,
            job.calendar_rules(),
            after,
            horizon_years=settings.CRONIQ_HORIZON_YEARS,
            policy=job.calendar_policy,
            key=job.name,
        )
        for source in found.sources
    ]
    if all(reasons) and not found.at:
        if len(reasons) == 1:
            return str(reasons[0])
        return (
            "never fires: none of its schedules meets its calendar within "
            f"{settings.CRONIQ_HORIZON_YEARS} years"
        )
    return "no fire time within the horizon and its bounds (not_before, not_after)"


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
        if allowed is None or (job.not_after is not None and allowed + offset > job.not_after):
            return None
        return allowed + offset
    return job.next_fire_after(instant)


def wall_time(job: Firing, instant: datetime) -> datetime:
    """An instant on the clock of the job's timezone, where its schedule is read."""
    return instant.astimezone(get_zone(job.timezone))


def wall_and_utc(job: Firing, instant: datetime) -> tuple[str, str | None]:
    """An instant as the admin and the dashboard show it (core.instants): (on
    the job's clock, in UTC), e.g. ("2026-12-07 09:00:00 CET", "08:00:00 UTC").
    The UTC text drops the date on the same day and is None for a job in
    UTC; a timezone that no longer resolves shows UTC alone."""
    utc = instant.astimezone(UTC)
    try:
        wall = job.wall_time(instant)
    except ValueError:
        wall = utc
    if wall.tzname() == "UTC":
        return shown(utc), None
    same_day = wall.date() == utc.date()
    # wall.tzinfo is the job's zone: astimezone() set it.
    return shown(wall, wall.tzinfo or UTC), shown_time(utc) if same_day else shown(utc)
