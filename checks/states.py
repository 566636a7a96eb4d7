"""A check's state machine (docs/design.md §12), pure: no database, no clock.

Every function takes `now`; the ping view and the loop read the clock once
and pass it down, tests pass fixed instants.

    new    --success-->  up      (no event: nothing was wrong before)
    up     --due------>  late    at next_expected_at (no event)
    late   --grace---->  down    at next_expected_at + grace: check.down
    any    --fail----->  down    at once (a fail ping, or a non-zero exit): check.down
    down   --success-->  up      check.up
    paused --success-->  up      a ping resumes a paused check, as healthchecks does

A `start` ping only notes when the run began (so the finishing ping has a
duration), a `log` ping only stores its body: neither changes the state.
A check that never pinged stays `new` (it has nothing to be late against);
a paused one waits for its next ping.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from scheduler.jobs import cron

NEW, UP, LATE, DOWN, PAUSED = "new", "up", "late", "down", "paused"
STATES = (NEW, UP, LATE, DOWN, PAUSED)

SUCCESS, START, FAIL, EXIT, LOG = "success", "start", "fail", "exit", "log"
KINDS = (SUCCESS, START, FAIL, EXIT, LOG)

CHECK_DOWN, CHECK_UP = "check.down", "check.up"


@dataclass(frozen=True)
class Timing:
    """When pings are expected: a cron `schedule` read in `timezone`, or a
    `period`; `grace` is how long after the due instant the check goes down.
    `key` seeds a schedule's `H` forms (the check's name, as a job's)."""

    schedule: str = ""
    timezone: str = "UTC"
    period: timedelta | None = None
    grace: timedelta = timedelta(minutes=1)
    key: str = ""


@dataclass(frozen=True)
class Status:
    """What a check row holds of its state."""

    state: str = NEW
    last_ping_at: datetime | None = None
    last_start_at: datetime | None = None
    next_expected_at: datetime | None = None
    down_at: datetime | None = None


@dataclass(frozen=True)
class Outcome:
    """A new Status, the event it causes (or None), and the duration of the
    run a finishing ping ends (since the last start ping), if any."""

    status: Status
    event: str | None = None
    duration: timedelta | None = None


def timing_of(schedule: str, timezone: str, period: int | None, grace: int, key: str) -> Timing:
    """The Timing of a check's columns (`period` and `grace` in seconds),
    whether read by the ORM (`Check.timing`) or by a ping's own SQL."""
    return Timing(
        schedule=schedule,
        timezone=timezone,
        period=timedelta(seconds=period) if period is not None else None,
        grace=timedelta(seconds=grace),
        key=key,
    )


def expected_after(timing: Timing, last_ping_at: datetime) -> datetime | None:
    """The instant the ping after one at `last_ping_at` is due: one period
    later, or the schedule's next instant strictly after it (None if it has
    none within the scheduler's horizon)."""
    if timing.period is not None:
        return last_ping_at + timing.period
    return cron.next_fire(timing.schedule, timing.timezone, None, last_ping_at, key=timing.key)


def expecting(timing: Timing, state: str, last_ping_at: datetime) -> Status:
    """The status of a check in `state` whose last ping was at `last_ping_at`:
    its deadlines, which only an `up` check has to meet (a down check is
    already down; its next expected instant is still shown)."""
    due = expected_after(timing, last_ping_at)
    down_at = due + timing.grace if due is not None and state == UP else None
    return Status(state=state, last_ping_at=last_ping_at, next_expected_at=due, down_at=down_at)


def on_ping(
    timing: Timing, status: Status, kind: str, now: datetime, exit_status: int | None = None
) -> Outcome:
    """The check after a ping of `kind` at `now` (EXIT carries `exit_status`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown ping kind {kind!r}")
    if kind == LOG:
        return Outcome(status)
    if kind == START:
        return Outcome(replace(status, last_start_at=now))
    failed = kind == FAIL or (kind == EXIT and exit_status != 0)
    state = DOWN if failed else UP
    duration = now - status.last_start_at if status.last_start_at is not None else None
    new = expecting(timing, state, now)
    event = None
    if failed and status.state != DOWN:
        event = CHECK_DOWN
    elif not failed and status.state == DOWN:
        event = CHECK_UP
    return Outcome(new, event, duration)


def on_tick(status: Status, now: datetime) -> Outcome:
    """The check at `now` with no ping since: late once due, down once the
    grace is over too (both at once when the loop was away that long)."""
    if status.state not in (UP, LATE):
        return Outcome(status)
    if status.down_at is not None and now >= status.down_at:
        return Outcome(replace(status, state=DOWN, down_at=None), CHECK_DOWN)
    due = status.next_expected_at
    if status.state == UP and due is not None and now >= due:
        return Outcome(replace(status, state=LATE))
    return Outcome(status)


def paused(status: Status) -> Status:
    """Paused: no deadlines until the next ping resumes it."""
    return replace(status, state=PAUSED, next_expected_at=None, down_at=None)


def retimed(timing: Timing, status: Status) -> Status:
    """The deadlines of `status` under a changed `timing` (an edit of the
    schedule, period or grace), counted from the last ping as before; an
    up or late check whose new deadline is later is up again."""
    if status.state not in (UP, LATE) or status.last_ping_at is None:
        return status
    again = expecting(timing, UP, status.last_ping_at)
    return replace(again, last_start_at=status.last_start_at)


def schedule_problem(schedule: str, timezone: str, key: str, now: datetime) -> str | None:
    """Why `schedule` cannot time a check from `now` on, in words, or None.
    A check is timed by cron text or a macro; `@every` is a job's grammar,
    and a check says the same with `period`. One that never comes (30
    February) would leave the check up for ever."""
    if schedule.strip().lower().startswith("@every"):
        return "@every is not a check schedule: give the check a period instead"
    try:
        return cron.never_fires_reason(schedule, timezone, None, now, key=key or None)
    except cron.ScheduleError as e:
        return str(e)
