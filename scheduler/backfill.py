"""Backfill: executions for the past instants a job's schedule produces in a
range, calendar applied as it is now (DESIGN.md §8).

They are created with run_after = now, so dispatch (ordered by run_after,
then scheduled_for) hands them out oldest instant first.

A singleton job may have one live (pending or running) execution
(`execution_singleton_live`), so its backfill cannot be created pending all
at once. Its executions are created `queued`, a state that index does not
cover and that no runner claims; whenever the job has no live execution, its
oldest queued one becomes pending (`promote`): at once here, when a run of
the job ends (`scheduler.lifecycle`, `operations.cancel`), and from a loop
step as the safety net. The index still guards the promotion: it is
refused, harmlessly, while a scheduled run, a retry or a manual run is live.
"""

import typing
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

import audit
from scheduler import notifier
from scheduler.cron import next_fires
from scheduler.models import Execution
from scheduler.refusals import OperationRefused

TINY = timedelta(microseconds=1)


class BackfillRefused(OperationRefused):
    """Refused as asked (422): `field` names what was wrong; nothing created."""

    def __init__(self, field, message):
        super().__init__(f"{field}: {message}")
        self.field = field


class Backfill(typing.NamedTuple):
    instants: list  # the instants backfilled (with dry_run: that would be)
    created: int


def instants_between(job, start, end):
    """The instants in [start, end) the job's schedule and calendar (as it
    is now) produce; BackfillRefused past CRONIQ_BACKFILL_CAP."""
    cap = settings.CRONIQ_BACKFILL_CAP
    first = job.first_fire_after(start - TINY)
    if first is None or first >= end:
        return []
    rest = next_fires(
        job.schedule, job.timezone, job.calendar_rules(), first, cap, job.calendar_policy,
        horizon_years=settings.CRONIQ_HORIZON_YEARS, key=job.name,
    )  # fmt: skip
    found = [t for t in [first, *rest] if t < end]
    if len(found) > cap:
        raise BackfillRefused(
            "end", f"the range holds more than {cap} instants (CRONIQ_BACKFILL_CAP)"
        )
    return found


def check_range(start, end, now):
    if end <= start:
        raise BackfillRefused("end", "must be after start")
    if end > now:
        raise BackfillRefused("end", "must not be in the future (the schedule fires those)")


def backfill(job, start, end, now, actor, dry_run=False):
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
        state = Execution.QUEUED if job.singleton else Execution.PENDING
        Execution.objects.bulk_create(
            Execution(
                job=job, scheduled_for=t, trigger=Execution.BACKFILL, state=state,
                singleton=job.singleton, run_after=now, created_at=now,
            )
            for t in instants
        )  # fmt: skip
        audit.record(
            "job.backfilled", target=job, actor=actor, at=now,
            data={"start": start.isoformat(), "end": end.isoformat(), "created": len(instants),
                  "first": instants[0].isoformat(), "last": instants[-1].isoformat()},
        )  # fmt: skip
        if job.singleton:
            promote(job.pk, now)
        transaction.on_commit(notifier.new_work)
    return Backfill(instants, len(instants))


def promote(job_id, now):
    """Make the oldest queued execution of a singleton job pending when the
    job has none live; returns it, or None. Part of the caller's transaction."""
    queued = (
        Execution.objects.filter(job_id=job_id, state=Execution.QUEUED)
        .order_by("scheduled_for", "id")
        .first()
    )
    if queued is None:
        return None
    try:
        with transaction.atomic():
            promoted = Execution.objects.filter(pk=queued.pk, state=Execution.QUEUED).update(
                state=Execution.PENDING, run_after=now
            )
    except IntegrityError:
        return None  # another run of the job is live: its end promotes this one
    if not promoted:
        return None
    transaction.on_commit(notifier.new_work)
    return queued


def promote_waiting(now):
    """The loop's safety net: promote for every singleton job that has
    queued executions and none live. Returns how many were promoted."""
    waiting = (
        Execution.objects.filter(state=Execution.QUEUED)
        .exclude(job__executions__state__in=Execution.ACTIVE_STATES)
        .values_list("job_id", flat=True)
        .distinct()
    )
    promoted = 0
    for job_id in list(waiting):
        with transaction.atomic():
            promoted += promote(job_id, now) is not None
    return promoted
