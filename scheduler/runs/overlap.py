"""Overlap policies: what an occurrence does while runs of its job are live
(docs/design.md §10). The fire step and manual runs decide here, holding the
job's row lock, so two loops never decide for the same job at once.

- allow: pending at once.
- skip (`singleton: true`): skipped while a run is live.
- queue: pending while fewer than `max_concurrent` runs are live; beyond,
  `queued` in the order of their instants, up to `max_queue`; beyond that,
  skipped.
- replace: the live run is cancelled (a pending one at once, a running one
  through its runner's next heartbeat) and the newcomer waits `queued`
  until the old run has ended: its runner reported the kill, or its lease
  ran out and the reaper settled it. A queued newcomer that a later one
  replaces in turn is skipped: one waits, the newest.

A queued execution becomes pending when a live one ends (`promote`: where a
run settles or is cancelled, and the loop's `promoted` step as the safety
net). A job with one live run at most (skip, replace, queue of 1) is
guarded by the singleton index too (`Job.one_live`); a larger queue by the
job's row lock, taken by whoever admits or promotes.
"""

import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, connection, transaction

import audit
from core import db
from scheduler.firing import fanout, notifier
from scheduler.models import Execution, Job
from scheduler.runs import spans
from scheduler.runs.refusals import OperationRefused

PENDING = "pending"
QUEUED = "queued"
SKIPPED = "skipped"


class Verdict(typing.NamedTuple):
    action: str  # PENDING, QUEUED or SKIPPED
    reason: str = ""  # why skipped: singleton, queue_full, superseded
    holder: str = ""  # the live run that made it skip or wait
    replaces: tuple[Execution, ...] = ()  # executions to cancel or supersede first


@dataclass
class Occupancy:
    """A job's executions that count for its overlap policy: live ones
    (pending or running, oldest first) and queued ones, as stored plus
    those this transaction adds."""

    live: list[Execution] = field(default_factory=list)
    queued: list[Execution] = field(default_factory=list)

    def holder(self) -> str:
        if not self.live:
            return ""
        first = self.live[0]
        return f"{first.pk} {first.state}" if first.pk else f"for {first.scheduled_for.isoformat()}"


def occupancy(jobs: Iterable[Job]) -> dict[int, Occupancy]:
    """{job id: Occupancy} for the jobs whose policy is not allow, in one query."""
    watched = [job.pk for job in jobs if job.overlap != Job.ALLOW]
    if not watched:
        return {}
    found = {pk: Occupancy() for pk in watched}
    rows = Execution.objects.filter(job_id__in=watched, state__in=Execution.OPEN_STATES)
    # A run waiting for its job's requirements is no occurrence yet
    # (scheduler.runs.requirements): it meets the policy when released.
    rows = rows.filter(requires_until__isnull=True).only(
        "pk", "job_id", "state", "scheduled_for", "attempt", "runner_id", "cancel_requested_at"
    )
    for execution in sorted(rows, key=lambda e: (e.scheduled_for, e.pk)):
        side = found[execution.job_id]
        (side.queued if execution.state == Execution.QUEUED else side.live).append(execution)
    return found


def clear_ahead(occupied: Occupancy | None) -> bool:
    """Whether a job with an overlap policy may fire ahead of its instant
    (`scheduler.firing.ticks.FIRE_LEAD`): none of its runs is open, so nothing the
    policy weighs can change before the instant but a manual run, which
    the job's row lock and the singleton index turn away."""
    return occupied is None or not (occupied.live or occupied.queued)


def admit(job: Job, execution: Execution, occupied: Occupancy | None) -> Verdict:
    """The verdict on a new execution of `job` (not saved yet), with
    `occupied` (its Occupancy) updated as if the verdict were carried out."""
    if job.overlap == Job.ALLOW:
        return Verdict(PENDING)
    assert occupied is not None  # occupancy() has one for every job with a policy
    live = occupied.live
    if job.overlap == Job.SKIP:
        if live:
            return Verdict(SKIPPED, "singleton", occupied.holder())
        live.append(execution)
        return Verdict(PENDING)
    if job.overlap == Job.QUEUE:
        if len(live) < job.concurrency_limit and not occupied.queued:
            live.append(execution)
            return Verdict(PENDING)
        if job.max_queue is not None and len(occupied.queued) >= job.max_queue:
            return Verdict(SKIPPED, "queue_full", occupied.holder())
        execution.state = Execution.QUEUED
        occupied.queued.append(execution)
        return Verdict(QUEUED, holder=occupied.holder())
    # replace
    replaces = tuple(live) + tuple(occupied.queued)
    occupied.queued[:] = []
    if any(e.state == Execution.RUNNING for e in live):
        # The running one ends first: the newcomer waits for it.
        occupied.live[:] = [e for e in live if e.state == Execution.RUNNING]
        execution.state = Execution.QUEUED
        occupied.queued.append(execution)
        return Verdict(QUEUED, holder=occupied.holder(), replaces=replaces)
    occupied.live[:] = [execution]
    return Verdict(PENDING, replaces=replaces)


def replace(old: Execution, by: str, now: datetime) -> bool:
    """Take `old` out of the way of the newer occurrence `by` (a text):
    a running run is asked to stop (its runner's next heartbeat), a pending
    or queued one, never started, is cancelled at once. An unsaved one (this
    transaction's) is left to the caller. Returns whether `old` was changed."""
    if old.pk is None:
        return False
    if old.state == Execution.RUNNING:
        done = Execution.objects.filter(
            pk=old.pk, state=Execution.RUNNING, cancel_requested_at__isnull=True
        ).update(cancel_requested_at=now)
        event = "execution.replaced"
    else:
        done = Execution.objects.filter(pk=old.pk, state=old.state).update(
            state=Execution.CANCELLED,
            singleton=False,
            finished_at=now,
            error=f"replaced by the occurrence {by} before it started",
        )
        if done:
            audit.increment("croniq_executions_total", state=Execution.CANCELLED)
        event = "execution.superseded"
    if done:
        audit.record(
            event,
            target=old,
            at=now,
            data={"state": old.state, "by": by},
            counter=("croniq_overlap_replacements_total", {"job": old.job.name}),
        )
    return bool(done)


# Every run that ends asks this, and nearly always nothing is queued:
# hand-written, as the ORM's exists() spent about 0.3 ms of CPU compiling a
# query that itself costs under 0.1 ms (a sixth of a runner's success finish).
HAS_QUEUED = f"SELECT 1 FROM {Execution._meta.db_table} WHERE job_id = %s AND state = %s LIMIT 1"


def has_queued(job_id: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(HAS_QUEUED, [job_id, Execution.QUEUED])
        return cursor.fetchone() is not None


def promote(job_id: int, now: datetime, known_queued: bool = False) -> int:
    """Make the oldest queued executions of a job pending while it has room
    under its policy (one at a time for a singleton-guarded job); returns
    how many. Part of the caller's transaction. `known_queued`: the caller
    has just read, in this transaction, that the job has queued ones."""
    if not known_queued and not has_queued(job_id):
        return 0
    job = Job.objects.filter(pk=job_id).only("overlap", "max_concurrent").first()
    if job is None:
        return 0
    limit = job.concurrency_limit
    if limit is not None and not job.one_live:
        # Counted, not indexed: promotions and admissions of the job take
        # turns on its row. (A singleton-guarded job needs no lock: the
        # index refuses a second live run.)
        lock(job_id)
    queued = Execution.objects.filter(
        job_id=job_id, state=Execution.QUEUED, requires_until__isnull=True
    ).order_by("scheduled_for", "id")
    if limit is not None:
        live = Execution.objects.filter(job_id=job_id, state__in=Execution.ACTIVE_STATES).count()
        queued = queued[: max(limit - live, 0)]
    promoted = 0
    for execution in queued:
        try:
            with transaction.atomic():
                promoted += Execution.objects.filter(
                    pk=execution.pk, state=Execution.QUEUED
                ).update(state=Execution.PENDING, run_after=max(now, execution.run_after))
        except IntegrityError:
            break  # another run of the job is live: its end promotes this one
    if promoted:
        transaction.on_commit(notifier.new_work)
    return promoted


def save_spread(execution: Execution) -> Execution:
    """Save `execution`, or for a run-on-all job one run per matching online
    runner (`scheduler.firing.fanout`): the first is returned, with all of them
    in its `occurrence`. OperationRefused when no runner matches."""
    runs = fanout.spread(execution)
    if not runs:
        labels = ", ".join(execution.job.labels or ()) or "none"
        raise OperationRefused(
            f"{execution.job.name} runs on all matching runners, and no runner with "
            f"its labels ({labels}) is online"
        )
    for run in runs:
        run.save()
    runs[0].occurrence = runs
    return runs[0]


def lock(job_id: int) -> None:
    """Lock the job's row on PostgreSQL (admissions and promotions of one
    job take turns); SQLite's write transactions already do."""
    list(db.for_update(Job.objects.filter(pk=job_id)).values_list("pk"))


def promote_waiting(now: datetime) -> int:
    """The loop's safety net: promote for every job that has queued
    executions. Returns how many were promoted."""
    waiting = (
        Execution.objects.filter(state=Execution.QUEUED, requires_until__isnull=True)
        .values_list("job_id", flat=True)
        .distinct()
    )
    promoted = 0
    for job_id in list(waiting):
        with transaction.atomic():
            promoted += promote(job_id, now)
    return promoted


def enter(job: Job, execution: Execution, now: datetime) -> Execution:
    """Save a manual execution of `job` (run now, trigger, replay) as its
    overlap policy says: pending, queued, or refused (OperationRefused,
    nothing saved) where the schedule's occurrence would be skipped. Part
    of the caller's transaction; IntegrityError when the singleton index
    or the instant's attempt refuses it."""
    execution.singleton = job.one_live
    if job.overlap == Job.ALLOW:
        execution = save_spread(execution)
        spans.fired(execution.occurrence)
        return execution
    lock(job.pk)
    verdict = admit(job, execution, occupancy([job]).get(job.pk))
    if verdict.action == SKIPPED:
        if verdict.reason == "singleton":
            why = f"is a singleton job and already has a live execution ({verdict.holder})"
        else:
            why = f"has a full queue ({job.max_queue} waiting; overlap: queue)"
        raise OperationRefused(f"{job.name} {why}")
    by = f"{execution.trigger} run for {execution.scheduled_for.isoformat()}"
    for old in verdict.replaces:
        replace(old, by, now)
    execution.save()
    spans.fired([execution])
    return execution
