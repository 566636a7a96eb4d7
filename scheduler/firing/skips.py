"""Occurrences the fire step keeps as skipped executions, so history shows
them: the ones a maintenance covers (or defers into one run at its end) and
the ones a job's overlap policy turns away; each audited and counted."""

from datetime import datetime
from typing import Any

import audit
from scheduler.models import Execution, Job
from scheduler.runs import maintenance, outcomes


def load_maintenance(jobs: list[Job], now: datetime) -> maintenance.Maintenance:
    """The maintenance as stored, with the windows that may cover the
    earliest instant these jobs fire for (a late one is judged at its instant)."""
    if not jobs:
        return maintenance.Maintenance()
    earliest = min((job.next_run_at for job in jobs if job.next_run_at), default=now)
    return maintenance.load(now, since=min(earliest, now))


def inside_maintenance(
    execution: Execution,
    window: maintenance.Window,
    occupied: dict[int, Any],
    waiting: dict[int, str],
    pending: list[Execution],
    skipped: list[tuple[Execution, maintenance.Window, str]],
) -> None:
    """An occurrence inside a maintenance: skipped (added to `skipped`), or,
    with `maintenance: defer`, one pending run at the window's end (added
    to `pending`) that the later occurrences coalesce into (skipped, naming
    it). No burst follows the window: one run, whatever it covered."""
    job = execution.job
    if job.maintenance != Job.DEFER:
        skipped.append((execution, window, None))
        return
    live = occupied.get(job.pk)
    into = waiting.get(job.pk) or (live and live.holder()) or pending_of(job)
    if into:
        skipped.append((execution, window, into))
        return
    # Claims hold it while the maintenance lasts; a window's end is when
    # it may run (the switch: as soon as it is off).
    if window.end is not None:
        execution.run_after = max(execution.run_after, window.end)
    waiting[job.pk] = f"for {execution.scheduled_for.isoformat()}"
    if live is not None:
        live.live.append(execution)
    pending.append(execution)
    audit.record(
        "execution.deferred",
        target=job,
        at=execution.created_at,
        data={
            "scheduled_for": execution.scheduled_for.isoformat(),
            "run_after": execution.run_after.isoformat(),
            "maintenance": window.describe(),
        },
    )


def pending_of(job: Job) -> str | None:
    """A pending execution of `job` a deferred occurrence may coalesce into."""
    pk = (
        Execution.objects.filter(job=job, state=Execution.PENDING)
        .values_list("pk", flat=True)
        .first()
    )
    return f"{pk} pending" if pk else None


SKIP_REASONS = {
    "singleton": "singleton job still has a live execution {holder}",
    "queue_full": "the job's queue is full (max_queue), behind {holder}",
    "superseded": "replaced by the later occurrence {holder} before it started",
    "no_runner": "run on all matching runners, and no runner with its labels was online",
}


def record_skip(execution: Execution, verdict: Any, now: datetime) -> None:
    """An occurrence its job's overlap policy turned away (a live run, a
    full queue, a later occurrence replacing it): kept as a skipped
    execution so history shows it, audited and counted."""
    holder = verdict.holder.isoformat() if hasattr(verdict.holder, "isoformat") else verdict.holder
    execution.state = Execution.SKIPPED
    execution.singleton = False  # not live, so outside the singleton index
    execution.finished_at = now
    execution.error = "skipped: " + SKIP_REASONS[verdict.reason].format(holder=holder)
    execution.save()
    outcomes.counted(execution.job_id, Execution.SKIPPED)
    audit.increment("croniq_executions_total", state=Execution.SKIPPED)
    if verdict.reason == "singleton":
        counter = ("croniq_singleton_skips_total", {"job": execution.job.name})
    elif verdict.reason == "no_runner":
        counter = ("croniq_fanout_unserved_total", {"job": execution.job.name})
    else:
        counter = ("croniq_overlap_skips_total", {"job": execution.job.name})
    audit.record(
        "execution.skipped",
        target=execution,
        at=now,
        data={"reason": verdict.reason, "live": holder},
        counter=counter,
    )


def record_maintenance(
    execution: Execution, window: maintenance.Window, into: str | None, now: datetime
) -> None:
    """An occurrence inside a maintenance, kept as a skipped execution so
    history shows it, audited and counted; `into`: the deferred run it
    coalesced into."""
    where = window.describe()
    execution.state = Execution.SKIPPED
    execution.singleton = False  # not live, so outside the singleton index
    execution.finished_at = now
    execution.error = f"skipped: {where}" + (f", coalesced into execution {into}" if into else "")
    execution.save()
    outcomes.counted(execution.job_id, Execution.SKIPPED)
    audit.increment("croniq_executions_total", state=Execution.SKIPPED)
    data = {"reason": "maintenance", "maintenance": where}
    if into:
        data["coalesced_into"] = into
    audit.record(
        "execution.skipped",
        target=execution,
        at=now,
        data=data,
        counter=("croniq_maintenance_skips_total", {"job": execution.job.name}),
    )
