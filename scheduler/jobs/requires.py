"""A job's requirements (docs/design.md §14): the jobs that must have a run
that succeeded shortly before an occurrence may run, and what happens when
one has not. Pure: the stored shape of `requires` and the decision, given
the latest successes; the database's side (the fire step's gate, waiting
runs, their release) is scheduler.runs.requirements.

`requires: [{job: NAME, succeeded_within: SECONDS}]` is met for the
occurrence at `instant` when each named job's latest success finished at
or after `instant - succeeded_within` (a success since the instant counts
too: a waiting run is released by it). Unmet, `requires_policy` decides:
`wait` holds the run until it is met or `requires_timeout` has passed since
the decision, then skips it; `skip` skips it at once; `fail` fails it.
"""

from datetime import datetime, timedelta
from typing import Any, NamedTuple

WAIT = "wait"
SKIP = "skip"
FAIL = "fail"
RUN = "run"

# Bounds: a person names a few upstream jobs; a window over a year or a
# wait over a week is a schedule mistake, and the arithmetic stays far from
# datetime's limits.
MAX_REQUIRES = 20
MAX_WINDOW = 366 * 86400
MAX_TIMEOUT = 7 * 86400
DEFAULT_TIMEOUT = 3600
KEYS = ("job", "succeeded_within")


class Requirement(NamedTuple):
    job: str
    within: timedelta

    def since(self, instant: datetime) -> datetime:
        """The earliest finish of a success that meets it for `instant`."""
        return instant - self.within


class Decision(NamedTuple):
    action: str  # RUN, WAIT, SKIP or FAIL
    unmet: tuple[Requirement, ...] = ()
    until: datetime | None = None  # WAIT: when the wait ends


def requirements(requires: list[dict[str, Any]]) -> list[Requirement]:
    """The stored `requires` as Requirements."""
    return [
        Requirement(entry["job"], timedelta(seconds=entry["succeeded_within"]))
        for entry in requires or ()
    ]


def names(requires: list[dict[str, Any]]) -> list[str]:
    """The jobs `requires` names."""
    return [entry["job"] for entry in requires or ()]


def unmet(
    requires: list[dict[str, Any]], instant: datetime, latest: dict[str, datetime]
) -> tuple[Requirement, ...]:
    """The requirements an occurrence at `instant` lacks; `latest`: {job
    name: when its latest success finished} (a job without one is absent)."""
    return tuple(
        need
        for need in requirements(requires)
        if (at := latest.get(need.job)) is None or at < need.since(instant)
    )


def decide(
    policy: str,
    timeout: int,
    missing: tuple[Requirement, ...],
    now: datetime,
    waiting_until: datetime | None = None,
) -> Decision:
    """What an occurrence lacking `missing` does at `now`: run (nothing
    missing), or as `policy` says. A run already waiting (`waiting_until`,
    its wait's end) keeps waiting until then, and is skipped from then on."""
    if not missing:
        return Decision(RUN)
    if waiting_until is not None:
        return (
            Decision(WAIT, missing, waiting_until)
            if now < waiting_until
            else Decision(SKIP, missing)
        )
    if policy == WAIT:
        return Decision(WAIT, missing, now + timedelta(seconds=timeout))
    return Decision(policy, missing)


def shape_problem(value: Any) -> str | None:
    """What is wrong with a stored `requires`, or None: a list of at most
    MAX_REQUIRES {job, succeeded_within} mappings (whole seconds, 1 to
    MAX_WINDOW), each job once. Apply reads durations written as text and
    names the entry (scheduler.apply.items.requirement_list)."""
    if not isinstance(value, list):
        return "a list of {job, succeeded_within}"
    if len(value) > MAX_REQUIRES:
        return f"at most {MAX_REQUIRES} jobs (got {len(value)})"
    seen = set()
    for index, entry in enumerate(value):
        where = f"requires[{index}]"
        if not isinstance(entry, dict) or set(entry) != set(KEYS):
            return f"{where}: expected {{job, succeeded_within}}"
        job, within = entry["job"], entry["succeeded_within"]
        if not isinstance(job, str) or not job:
            return f"{where}.job: a job name"
        if isinstance(within, bool) or not isinstance(within, int) or not 1 <= within <= MAX_WINDOW:
            return f"{where}.succeeded_within: whole seconds from 1 to {MAX_WINDOW}"
        if job in seen:
            return f"{where}.job: {job!r} is listed twice"
        seen.add(job)
    return None


def describe(missing: tuple[Requirement, ...], instant: datetime) -> str:
    """'a has not succeeded since 2026-06-01T07:30:00+00:00, b ...'."""
    return ", ".join(
        f"{need.job} has not succeeded since {need.since(instant).isoformat()}" for need in missing
    )
