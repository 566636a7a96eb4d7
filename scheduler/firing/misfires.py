"""A job's due occurrences and its misfire policy: which instants came due
on time, which were missed (older than the grace), and which of those the
policy fires; the misfire is audited and counted."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

import audit
from scheduler.models import Execution, Job

# Occurrences enumerated one by one before a long outage is treated in bulk.
ENUMERATION_LIMIT = 1000


@dataclass
class Occurrences:
    """The instants of one job that came due by `now`, split by misfire grace."""

    on_time: list = field(default_factory=list)
    missed: list = field(default_factory=list)
    missed_uncounted: bool = False  # an outage too long to enumerate
    last: object = None  # the last due instant
    next_instant: object = None  # the first instant after now: the new next_run_at
    counted: int = 0  # every due instant, listed or not: what `max_runs` counts


def due_occurrences(job: Job, now: datetime, until: datetime | None = None) -> Occurrences:
    """The instants due by `until` (default `now`); misfires are judged at
    `now`. A job with `max_runs` has at most its `runs_left`: after its
    last one, no next instant."""
    until = now if until is None else until
    grace = timedelta(seconds=settings.CRONIQ_MISFIRE_GRACE)
    result = Occurrences()
    left = job.runs_left
    instant = job.next_run_at if left != 0 else None
    enumerated = 0
    while instant is not None and instant <= until:
        if enumerated == ENUMERATION_LIMIT and not result.missed_uncounted:
            # Too many missed instants to list: jump to the grace window (on
            # an `@every` job's grid, as its previews counted).
            result.missed_uncounted = True
            instant = skip_missed(job, instant, now - grace, result, left)
            continue
        (result.missed if now - instant > grace else result.on_time).append(instant)
        result.last = instant
        enumerated += 1
        result.counted += 1
        if result.counted == left:
            instant = None  # its last occurrence: the job completes
            break
        instant = job.next_fire_after(instant)
    result.next_instant = instant
    return result


def skip_missed(
    job: Job, instant: datetime, since: datetime, result: Occurrences, left: int | None
) -> datetime | None:
    """The first instant of `job` after `since`, past the missed instants
    from `instant` on, which are not listed. A job with `max_runs` counts
    them one by one (at most its `runs_left`); None when they are its last."""
    if left is None:
        return job.first_fire_after(since - timedelta(microseconds=1))
    while instant is not None and instant < since:
        result.last = instant
        result.counted += 1
        if result.counted == left:
            return None
        instant = job.next_fire_after(instant)
    return instant


def apply_misfire_policy(
    job: Job, occurrences: Occurrences, now: datetime
) -> list[tuple[datetime, str]]:
    """[(instant, trigger)] to fire; records the misfire when instants are dropped."""
    on_time = [(t, Execution.SCHEDULE) for t in occurrences.on_time]
    missed = occurrences.missed
    if not missed and not occurrences.missed_uncounted:
        return on_time
    if job.misfire_policy == Job.RUN_ALL:
        cap = settings.CRONIQ_RUN_ALL_CAP
        catch_up = [(t, Execution.CATCH_UP) for t in missed][-cap:]
        dropped = len(missed) - len(catch_up)
        fired = catch_up + on_time
    elif job.misfire_policy == Job.RUN_ONCE and not on_time:
        fired = [(missed[-1], Execution.CATCH_UP)] if missed else []
        dropped = len(missed) - len(fired)
    else:  # skip, or run_once with an on-time occurrence that covers the gap
        fired = on_time
        dropped = len(missed)
    record_misfire(job, missed, dropped, occurrences.missed_uncounted, now)
    return fired


def record_misfire(job: Job, missed: int, dropped: int, uncounted: int, now: datetime) -> None:
    audit.record(
        "job.misfire",
        target=job,
        at=now,
        data={
            "policy": job.misfire_policy,
            "missed": len(missed),
            "dropped": dropped,
            "more_than_listed": uncounted,
            "first_missed": missed[0].isoformat() if missed else None,
        },
        counter=("croniq_misfires_total", {"job": job.name}),
    )
