"""Backfill: executions for the past instants a job's schedule produces in a
range, calendar applied as it is now (docs/design.md §8).

They are created with run_after = now, so dispatch (ordered by run_after,
then scheduled_for) hands them out oldest instant first.

A job with an overlap policy (skip, queue, replace) may have only so many
live (pending or running) executions, so its backfill cannot be created
pending all at once. Its executions are created `queued`, a state no runner
claims; whenever the job has room, its oldest queued ones become pending
(`scheduler.runs.overlap.promote`): at once here, when a run of the job ends
(`scheduler.runs.lifecycle`, `operations.cancel`), and from a loop step as the
safety net.

A backfill that would leave the job more pending executions than
CRONIQ_TRIGGER_QUEUE_LIMIT is refused, as a trigger is: 429 with
Retry-After when the pending ones already there are in the way, 422 naming
`end` when the range alone holds more runs than the limit.
"""

import copy
import typing
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

import audit
from scheduler.firing import fanout, notifier
from scheduler.firing.triggers import QUEUE_FULL_RETRY_AFTER, QueueFull
from scheduler.jobs.cron import next_fires
from scheduler.models import Execution, Job
from scheduler.runs import overlap, spans
from scheduler.runs.refusals import OperationRefused

TINY = timedelta(microseconds=1)


class BackfillRefused(OperationRefused):
    """Refused as asked (422): `field` names what was wrong; nothing created."""

    def __init__(self, field, message) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class BackfillQueueFull(QueueFull):
    """The job's pending executions and this backfill's together pass
    CRONIQ_TRIGGER_QUEUE_LIMIT (429 with Retry-After): runners must take
    some first."""

    def __init__(self, job, pending, adding, limit) -> None:
        OperationRefused.__init__(
            self,
            f"{job.name} has {pending} pending executions; {adding} more would pass "
            f"the limit of {limit} (CRONIQ_TRIGGER_QUEUE_LIMIT); try again later",
        )
        self.retry_after = QUEUE_FULL_RETRY_AFTER


class Backfill(typing.NamedTuple):
    instants: list  # the instants backfilled (with dry_run: that would be)
    created: int


def instants_between(job: Job, start: datetime, end: datetime) -> list[datetime]:
    """The instants in [start, end) the job's schedule and calendar (as it
    is now) produce; BackfillRefused past CRONIQ_BACKFILL_CAP."""
    cap = settings.CRONIQ_BACKFILL_CAP
    if job.max_runs is not None:
        # Backfilled runs are not scheduled occurrences: max_runs neither
        # counts nor limits them.
        job = copy.copy(job)
        job.max_runs = None
    first = job.first_fire_after(start - TINY)
    if first is None or first >= end:
        return []
    if job.timing is None:
        rest = next_fires(
            job.schedule, job.timezone, job.calendar_rules(), first, cap, job.calendar_policy,
            horizon_years=settings.CRONIQ_HORIZON_YEARS, key=job.name,
        )  # fmt: skip
    else:
        rest = union_instants(job, first, end, cap)
    found = [t for t in [first, *rest] if t < end]
    if len(found) > cap:
        raise BackfillRefused(
            "end", f"the range holds more than {cap} instants (CRONIQ_BACKFILL_CAP)"
        )
    return found


def union_instants(job: Job, first: datetime, end: datetime, cap: int) -> list[datetime]:
    """Up to `cap` + 1 instants after `first` and before `end` of a job
    with several schedules, one-shot instants or bounds (docs/design.md §14)."""
    found: list[datetime] = []
    instant: datetime | None = first
    while len(found) < cap + 1:
        instant = job.next_fire_after(instant)
        if instant is None or instant >= end:
            break
        found.append(instant)
    return found


def check_range(start: datetime, end: datetime, now: datetime) -> None:
    if end <= start:
        raise BackfillRefused("end", "must be after start")
    if end > now:
        raise BackfillRefused("end", "must not be in the future (the schedule fires those)")


def check_queue(job: Job, adding: int) -> None:
    """Refuse `adding` new pending executions of `job` past
    CRONIQ_TRIGGER_QUEUE_LIMIT; the caller holds the job's row lock, so
    triggers and other backfills of the job wait for this one."""
    limit = settings.CRONIQ_TRIGGER_QUEUE_LIMIT
    if adding > limit:
        raise BackfillRefused(
            "end",
            f"the range makes {adding} runs, more than the {limit} pending executions a job "
            "may have (CRONIQ_TRIGGER_QUEUE_LIMIT); backfill a shorter range",
        )
    pending = Execution.objects.filter(job=job, state=Execution.PENDING)[:limit].count()
    if pending + adding > limit:
        raise BackfillQueueFull(job, pending, adding, limit)


def backfill(
    job: Job, start: datetime, end: datetime, now: datetime, actor: object, dry_run: bool = False
) -> Backfill:
    """Create an execution (trigger `backfill`) for each instant in
    [start, end) that has none yet. Audited unless `dry_run`."""
    check_range(start, end, now)
    with transaction.atomic():
        # Locked: a concurrent backfill or the loop's fire of this job waits
        # (the loop skips it), so "has none yet" stays true until the commit.
        job = job.locked()
        instants = instants_between(job, start, end)
        taken = set(
            Execution.objects.filter(
                job=job, scheduled_for__gte=start, scheduled_for__lt=end
            ).values_list("scheduled_for", flat=True)
        )
        instants = [t for t in instants if t not in taken]
        if dry_run or not instants:
            return Backfill(instants, 0)
        # A job with an overlap policy takes its backfill in turns.
        waits = job.overlap != Job.ALLOW
        state = Execution.QUEUED if waits else Execution.PENDING
        # A run-on-all job's instants run on each runner online now.
        roster = fanout.runners_for(job.requirements) if job.run_on == Job.ALL else None
        if roster == []:
            raise OperationRefused(
                f"{job.name} runs on all matching runners, and none with its labels is online"
            )
        if not waits:  # queued runs become pending only as the overlap policy lets them
            runs_per_instant = len(roster) if roster else 1
            check_queue(job, len(instants) * runs_per_instant)
        runs = Execution.objects.bulk_create(
            run
            for t in instants
            for run in fanout.spread(Execution(
                job=job, scheduled_for=t, trigger=Execution.BACKFILL, state=state,
                singleton=job.one_live, run_after=now, created_at=now,
            ), roster)
        )  # fmt: skip
        spans.fired(runs)
        audit.record(
            "job.backfilled", target=job, actor=actor, at=now,
            data={"start": start.isoformat(), "end": end.isoformat(), "created": len(instants),
                  "first": instants[0].isoformat(), "last": instants[-1].isoformat()},
        )  # fmt: skip
        if waits:
            overlap.promote(job.pk, now)
        transaction.on_commit(notifier.new_work)
    return Backfill(instants, len(instants))
