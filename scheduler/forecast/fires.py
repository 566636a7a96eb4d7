"""Where a job's fire instants come from: the loop's own next-fire math
(scheduler.jobs.cron), bounded to the forecast's window, moved by a job's
jitter. Pure: no database, no clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from calendars.rules import CalendarRules
from scheduler.jobs import fire_times
from scheduler.jobs.cron import next_fire, parse_schedule

Fires = Callable[[datetime], Iterator[datetime]]


class WithinWindow:
    """A job's CalendarRules whose answers stop at `until`: no fire past
    the window matters, and a schedule that seldom meets its calendar would
    otherwise be searched up to the horizon (years) on every call."""

    def __init__(self, rules: CalendarRules, until: datetime) -> None:
        self.rules = rules
        self.until = until

    def next_allowed(self, t: datetime, horizon: datetime | None = None) -> datetime | None:
        allowed: datetime | None = (
            self.rules.next_allowed(t, horizon=self.until) if t <= self.until else None
        )
        return allowed

    def day_allowed(self, day: date) -> bool:
        """`@business_day` counts the calendar's allowed days (scheduler.jobs.cron):
        a whole day is judged by the calendar alone, the window does not cut it."""
        allowed: bool = self.rules.day_allowed(day)
        return allowed


def schedule_fires(
    schedule: str,
    tz: str | ZoneInfo,
    calendar: CalendarRules | None,
    policy: str,
    until: datetime,
    anchor: datetime | None = None,
    key: str | None = None,
) -> Fires:
    """`JobLoad.fires` for a job: `scheduler.jobs.cron.next_fire`, the loop's own
    math (DST rules, calendar gating and policy), up to `until`. An `@every`
    job's grid runs through `anchor` (its next_run_at), as in
    `Job.first_fire_after`; the Job methods would search its calendar up to
    the horizon, which the forecast never needs. `key`: the job's name (H forms)."""
    parsed = parse_schedule(schedule, key=key)
    # A stand-in for the CalendarRules: next_fire asks only what WithinWindow answers.
    gate: Any = WithinWindow(calendar, until) if calendar is not None else None

    def fires(after: datetime) -> Iterator[datetime]:
        if parsed.every is not None and anchor is not None:
            after = anchor + ((after - anchor) // parsed.every) * parsed.every
        instant = next_fire(parsed, tz, gate, after, policy, horizon_years=1)
        while instant is not None and instant < until:
            yield instant
            instant = next_fire(parsed, tz, gate, instant, policy, horizon_years=1)

    return fires


def job_fires(job: Any, until: datetime) -> Fires:
    """`JobLoad.fires` of a job with more than one schedule, one-shot
    instants, bounds or a run limit (docs/design.md §14): the loop's own
    `fire_times.fires`, jitter included, up to `until`. Its calendar
    should answer no further than `until` (WithinWindow)."""

    def fires(after: datetime) -> Iterator[datetime]:
        for instant in fire_times.fires(job, after):
            if instant >= until:
                return
            yield instant

    return fires


def delayed(fires: Fires, offset: timedelta | None, until: datetime) -> Fires:
    """`fires` moved later by a job's jitter `offset` (none: as they are)."""
    if not offset:
        return fires

    def moved(after: datetime) -> Iterator[datetime]:
        for instant in fires(after - offset):
            if instant + offset >= until:
                return
            yield instant + offset

    return moved


def failing(error: Exception) -> Fires:
    """`JobLoad.fires` of a job whose schedule or calendar cannot be read:
    `forecast_load` names it among the skipped."""

    def fires(after: datetime) -> Iterator[datetime]:
        raise error
        yield  # a generator, as the others

    return fires
