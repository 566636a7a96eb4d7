"""Whether a runner still speaks, and what its silence means for the run it
holds (docs/design.md §17): the runners page's state and "last seen", and
the execution page's "runner silent 25 s; lease expires in 5 s; it will be
retried", the page and what its script polls reading both from here.

Everything takes `now`. The thresholds are counted in heartbeat intervals
(`CRONIQ_HEARTBEAT_INTERVAL`, I): an agent speaks at least once an
interval, by its heartbeat while it holds work and through its waiting poll
(the hub refreshes `last_seen_at` once an interval) while it waits for some.

- quiet, past 1.5 I: a heartbeat is half an interval late. Jitter, a slow
  answer or a hub scan late by its safety interval can do that; it is a
  colour, not a state.
- silent, past 2 I: a whole interval beyond the heartbeat that was due, the
  next one due too. Lateness does not explain it: the agent is gone, hung or
  cut off. It leaves an interval of warning (10 s by default) before the
  loop marks the runner offline at 3 I, and before its runs' leases
  (renewed at its last heartbeat, `CRONIQ_LEASE_TTL` being at least 3 I)
  run out and the reaper settles them lost.
- offline, past 3 I, once the loop's step has marked it so (until then a
  runner that is overdue is still shown silent).
"""

import math
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings

from runners.models import Runner
from scheduler.models import Execution
from scheduler.runs import lifecycle

QUIET_AFTER_HEARTBEATS = 1.5
SILENT_AFTER_HEARTBEATS = 2
# The loop marks a runner offline after this many intervals of silence
# (`loop_steps.update_runner_states`).
OFFLINE_AFTER_HEARTBEATS = 3

FRESH = "fresh"
QUIET = "quiet"
SILENT = "silent"
OFFLINE = "offline"


def heartbeat() -> timedelta:
    return timedelta(seconds=settings.CRONIQ_HEARTBEAT_INTERVAL)


def silent_after() -> timedelta:
    """Silence after which a runner is shown silent."""
    return SILENT_AFTER_HEARTBEATS * heartbeat()


def offline_after() -> timedelta:
    """Silence after which the loop marks a runner offline."""
    return OFFLINE_AFTER_HEARTBEATS * heartbeat()


class Liveness(NamedTuple):
    """How a runner looks: `kind` is fresh, quiet, silent or offline; `age`
    the time since it was last heard from."""

    kind: str
    age: timedelta

    @property
    def out_of_touch(self) -> bool:
        """Silent or offline: nothing it holds is known to make progress."""
        return self.kind in (SILENT, OFFLINE)


def liveness(
    state: str, last_seen_at: datetime, now: datetime, interval: timedelta | None = None
) -> Liveness:
    """How a runner in `state`, last heard from at `last_seen_at`, looks at
    `now` (`interval`: the heartbeat interval, the setting's by default)."""
    interval = interval or heartbeat()
    age = max(now - last_seen_at, timedelta(0))
    if state == Runner.OFFLINE:
        return Liveness(OFFLINE, age)
    if age > SILENT_AFTER_HEARTBEATS * interval:
        return Liveness(SILENT, age)
    if age > QUIET_AFTER_HEARTBEATS * interval:
        return Liveness(QUIET, age)
    return Liveness(FRESH, age)


def shown_state(state: str, seen: Liveness) -> str:
    """The state a runner's row shows: "silent" for a silent runner the
    loop has not marked offline yet, else its stored state."""
    return SILENT if seen.kind == SILENT else state


# -- a running execution's liveness -------------------------------------------


class RunLiveness(NamedTuple):
    """Why a running execution may not be running any more: `kind` is
    "silent" (its runner is silent or offline) or "lapsed" (its runner still
    speaks but the lease ran out: the reaper is about to settle it)."""

    kind: str
    text: str

    @property
    def label(self) -> str:
        """The few words beside the page's live dot, which stands still."""
        return "runner silent" if self.kind == SILENT else "lease ran out"

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "label": self.label, "text": self.text}


def run_liveness(
    execution: Execution, now: datetime, interval: timedelta | None = None
) -> RunLiveness | None:
    """What the execution page says of a running execution whose runner has
    gone silent or whose lease ran out; None while it is not running, or its
    runner speaks and its lease holds. Reads the execution's runner (select
    it with the execution) and, only when it says something, its earlier
    attempts for the retry it would get."""
    if execution.state != Execution.RUNNING or execution.runner is None:
        return None
    runner = execution.runner
    seen = liveness(runner.state, runner.last_seen_at, now, interval)
    lease_left = execution.lease_expires_at - now if execution.lease_expires_at else None
    lapsed = lease_left is not None and lease_left <= timedelta(0)
    if not seen.out_of_touch and not lapsed:
        return None
    return describe(
        seen,
        lease_left,
        lifecycle.no_retry_if_lost(execution),
        pinned_to=execution.pinned_to,
    )


def describe(
    seen: Liveness, lease_left: timedelta | None, no_retry: str | None, pinned_to: str = ""
) -> RunLiveness:
    """The words for a run of a runner that looks `seen`, its lease running
    out in `lease_left` (negative: it ran out that long ago), given why it
    would get no retry when lost (`lifecycle.no_retry_if_lost`: None, it
    would get one) and the runner it is pinned to (run on every runner)."""
    parts = []
    if seen.kind == SILENT:
        parts.append(f"runner silent {span(seen.age)}")
    elif seen.kind == OFFLINE:
        parts.append(f"runner offline, silent {span(seen.age)}")
    if lease_left is not None:
        if lease_left > timedelta(0):
            parts.append(f"lease expires in {span(lease_left, up=True)}")
        else:
            parts.append(f"lease ran out {span(-lease_left)} ago")
    if not seen.out_of_touch:
        parts.append(f"runner last seen {span(seen.age)} ago")
    parts.append(retry_words(seen, no_retry, pinned_to))
    return RunLiveness(SILENT if seen.out_of_touch else "lapsed", "; ".join(parts))


def retry_words(seen: Liveness, no_retry: str | None, pinned_to: str) -> str:
    if no_retry is not None:
        return f"it will not be retried: {no_retry}"
    if not pinned_to:
        return "it will be retried"
    # A run on every runner retries on its own runner alone, and a pending
    # run pinned to a runner marked offline is dropped without a retry
    # (`loop_steps.drop_orphaned_pins`).
    if seen.kind == OFFLINE:
        return f"it will not be retried: it is pinned to {pinned_to}, which is offline"
    if seen.kind == SILENT:
        return f"it will be retried on {pinned_to} alone, if it is back before it is marked offline"
    return f"it will be retried on {pinned_to}"


def span(delta: timedelta, up: bool = False) -> str:
    """ "25 s", "4 min 5 s", "2 h 10 min": whole seconds, rounded down (up,
    for a time still to run, so a lease about to expire never reads "in 0 s")."""
    seconds = delta.total_seconds()
    whole = math.ceil(seconds) if up else math.floor(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, rest = divmod(whole, 3600)
    return f"{hours} h {rest // 60} min" if rest >= 60 else f"{hours} h"


def ago(age: timedelta) -> str:
    """ "17 s ago", "4 min ago", "3 h ago", "2 d ago" (whole units, rounded down)."""
    seconds = int(age.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"
