"""Operator actions on jobs and executions (admin, dashboard, management
API). Each is audited."""

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Min, Q

import audit
from scheduler.firing import job_edits, notifier
from scheduler.jobs import webhooks
from scheduler.models import Execution, Job
from scheduler.runs import lifecycle, outcomes, overlap
from scheduler.runs.refusals import OperationRefused  # noqa: F401 - callers catch it from here


def run_now(
    job: Job,
    now: datetime,
    actor: object,
    scheduled_for: datetime | None = None,
    env: dict[str, str] | None = None,
    note: dict[str, Any] | None = None,
    trigger: str = Execution.MANUAL,
) -> Execution:
    """A manual execution now, for the logical instant `scheduled_for`
    (default: now), with `env` added to the job's; it waits its turn, or is
    refused, as the job's overlap policy says (a singleton job with one
    live), and refused when that instant has a first attempt already.
    `note` adds to the audit event's data; `trigger` is the run's
    (`webhook` for a call of the job's webhook URL)."""
    instant = now if scheduled_for is None else scheduled_for
    try:
        with transaction.atomic():
            execution = overlap.enter(
                job,
                Execution(
                    job=job,
                    scheduled_for=instant,
                    trigger=trigger,
                    run_after=now,
                    created_at=now,
                    env=env or {},
                ),
                now,
            )
    except IntegrityError:
        raise OperationRefused(f"{job.name} already has a live or identical execution") from None
    data = {"execution": execution.pk, **(note or {})}
    if scheduled_for is not None:
        data["scheduled_for"] = scheduled_for.isoformat()
    audit.record("job.run_now", target=job, actor=actor, at=now, data=data)
    notify_runners()
    return execution


def regenerate_webhooks(jobs: Iterable[Job], now: datetime, actor: object) -> int:
    """A new webhook URL for each of `jobs` that has a webhook; the old one
    answers 404 from the commit on (scheduler.jobs.webhooks). Audited
    `job.webhook_regenerated`; returns how many."""
    regenerated = 0
    for job in jobs.filter(webhook=True):
        changed = Job.objects.filter(pk=job.pk, webhook=True).update(
            webhook_key=webhooks.new_key(), updated_at=now
        )
        if changed:
            audit.record("job.webhook_regenerated", target=job, actor=actor, at=now)
            regenerated += 1
    return regenerated


def pause(
    jobs: Iterable[Job],
    now: datetime,
    actor: object,
    reason: str = "",
    until: datetime | None = None,
    note: dict[str, Any] | None = None,
) -> int:
    """Take the jobs that are not paused out of the schedule; with `until`,
    each resumes by itself at that instant (`resume_ended_pauses`). `note`
    adds to each audit event's data."""
    paused = 0
    for job in jobs.filter(paused_at__isnull=True):
        job.withdraw_ahead(now)
        Job.objects.filter(pk=job.pk).update(
            paused_at=now,
            paused_until=until,
            pause_reason=reason,
            next_run_at=None,
            updated_at=now,
        )
        data = {"reason": reason} if reason else {}
        data.update(note or {})
        if until is not None:
            data["until"] = until.isoformat()
            job_edits.saved()  # the loop's pauses_ended step learns of its end
        audit.record("job.paused", target=job, actor=actor, at=now, data=data)
        paused += 1
    return paused


def resume(
    jobs: Iterable[Job], now: datetime, actor: object, note: dict[str, Any] | None = None
) -> int:
    """Paused jobs, and jobs quarantined by an error, fire again from now.
    `note` adds to each audit event's data."""
    resumed = 0
    stopped = Q(paused_at__isnull=False) | ~Q(error="")
    for job in jobs.filter(stopped).select_related("calendar"):
        error = job.error
        job.paused_at, job.paused_until, job.pause_reason = None, None, ""
        cleared = job.clear_error()
        job.reschedule(now)
        job.save(
            update_fields=[
                "paused_at", "paused_until", "pause_reason", "next_run_at", "updated_at",
                *cleared,
            ]
        )  # fmt: skip
        data = {"next_run_at": job.next_run_at.isoformat() if job.next_run_at else None}
        if error:
            data["cleared_error"] = error
        data.update(note or {})
        audit.record("job.resumed", target=job, actor=actor, at=now, data=data)
        resumed += 1
    return resumed


# The pauses_ended step looks at least this often, whatever it knows. A
# pause with an end wakes the loop (`job_edits.saved`), so this only bounds
# what a writer that does not costs, as the loop's EARLIEST_REREAD_EVERY.
PAUSES_CHECKED_AT_LEAST_EVERY = 30.0


def next_pause_end(now: datetime) -> datetime:
    """When resume_ended_pauses may next find an ended pause (`Step.until`):
    the earliest `paused_until` (the job_pause_ends index), at the latest
    PAUSES_CHECKED_AT_LEAST_EVERY from now. A pause taken meanwhile is a
    job edit, after which the loop runs the step at its next tick."""
    earliest = Job.objects.filter(paused_until__isnull=False).aggregate(at=Min("paused_until"))
    latest = now + timedelta(seconds=PAUSES_CHECKED_AT_LEAST_EVERY)
    return latest if earliest["at"] is None else min(earliest["at"], latest)


def resume_ended_pauses(now: datetime) -> int:
    """The loop step: jobs paused `until` an instant now past fire again,
    from that instant on (an occurrence at it fires). Returns how many.

    A job whose schedule cannot be evaluated any more is resumed into
    quarantine (`Job.error`), like one the fire step cannot fire.
    """
    resumed = 0
    ended = Job.objects.filter(paused_until__lte=now, paused_at__isnull=False)
    for job in ended.select_related("calendar"):
        until = job.paused_until
        job.paused_at = None
        fields = {"next_run_at": None}
        try:
            if job.is_active:
                fields["next_run_at"] = job.fire_after_pause(until)
        except ValueError as e:
            fields.update(error=str(e), error_at=now)
        with transaction.atomic():
            # Conditional on the pause read: an operator's resume or a
            # second loop got there first, or the pause was renewed.
            done = Job.objects.filter(pk=job.pk, paused_until=until).update(
                paused_at=None, paused_until=None, pause_reason="", updated_at=now, **fields
            )
            if done:
                # Another loop may be resting on an earliest due job read
                # while this one was paused (`scheduler.firing.loop`).
                job_edits.saved()
                next_run = fields["next_run_at"]
                audit.record(
                    "job.resumed", target=job, at=now,
                    data={
                        "paused_until": until.isoformat(),
                        "next_run_at": next_run.isoformat() if next_run else None,
                        **({"error": fields["error"]} if "error" in fields else {}),
                    },
                )  # fmt: skip
                resumed += 1
    return resumed


WAITING = (Execution.QUEUED, Execution.PENDING)


def cancel(executions: Iterable[Execution], now: datetime, actor: object) -> int:
    """Queued and pending ones are cancelled at once; running ones are asked to stop
    through the runner's next heartbeat (its `cancel` list)."""
    cancelled = 0
    for execution in executions.filter(state__in=Execution.OPEN_STATES):
        if execution.state in WAITING:
            with transaction.atomic():
                done = Execution.objects.filter(pk=execution.pk, state=execution.state).update(
                    state=Execution.CANCELLED, finished_at=now, error="cancelled by an operator"
                )
                if done:
                    outcomes.counted(execution.job_id, Execution.CANCELLED)
                    audit.increment("croniq_executions_total", state=Execution.CANCELLED)
                    if execution.state == Execution.PENDING:
                        overlap.promote(execution.job_id, now)
        else:
            done = Execution.objects.filter(
                pk=execution.pk, state=Execution.RUNNING, cancel_requested_at__isnull=True
            ).update(cancel_requested_at=now)
        if done:
            audit.record(
                "execution.cancel", target=execution, actor=actor, at=now,
                data={"state": execution.state},
            )  # fmt: skip
            cancelled += 1
    return cancelled


RETRYABLE = (Execution.FAILED, Execution.TIMED_OUT, Execution.LOST, Execution.CANCELLED)


def retry(execution: Execution, now: datetime, actor: object) -> Execution:
    """A new attempt of a finished execution, now."""
    if execution.state not in RETRYABLE:
        raise OperationRefused(f"execution {execution.pk} is {execution.state}, not retryable")
    latest = (
        Execution.objects.filter(job=execution.job, scheduled_for=execution.scheduled_for)
        .order_by("-attempt")
        .first()
    )
    new = lifecycle.next_attempt(execution, latest.attempt + 1, now, now)
    if new is None:
        raise OperationRefused(f"{execution.job.name} already has a live execution")
    audit.record(
        "execution.retry", target=new, actor=actor, at=now,
        data={"previous": execution.pk, "by": "operator"},
        counter=("croniq_retries_total", {"reason": "operator"}),
    )  # fmt: skip
    notify_runners()
    return new


def notify_runners() -> None:
    transaction.on_commit(notifier.new_work)
