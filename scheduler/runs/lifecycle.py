"""State transitions of an Execution that more than one app needs.

Every transition out of `running` is a conditional update on the row (id,
lease, state): zero rows updated means someone else got there first (a reap,
a takeover, a newer lease), which callers treat as a normal outcome.
"""

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

import audit
from scheduler.models import MAX_RETRY_DELAY, Execution
from scheduler.runs import chains, outcomes, overlap, requirements
from scheduler.triage import dead_letters

LEASE_EXPIRED = "lease_expired"
RUNNER_SUPERSEDED = "runner_superseded"
RUNNER_FORGOTTEN = "runner_forgotten"
RUNNER_DRAINED = "runner_drained"
# A pending run pinned to a runner (run_on: all) whose runner went offline
# or was forgotten before starting it: nobody else may run it, so no retry.
RUNNER_GONE = "pinned_runner_gone"


def settle(
    execution: Execution,
    state: str,
    now: datetime,
    within: QuerySet | None = None,
    retry_after_lease: bool = False,
    **fields: Any,
) -> Execution | None | bool:
    """Move a running execution held under `execution.lease` to a final state.

    `within`, a queryset, adds its conditions to the update (they are checked
    again when the row is written, not only when it was read).
    `retry_after_lease`: its runner may still run it (settled without the
    runner), so the retry is not dispatched before the lease runs out, or
    before that runner confirms the kill (`confirm_kill`).
    Returns the retry attempt created (or None). Returns False when the
    execution was no longer held under that lease (nothing changed).
    """
    rows = Execution.objects.all() if within is None else within
    with transaction.atomic():
        updated = rows.filter(
            pk=execution.pk, lease=execution.lease, state=Execution.RUNNING
        ).update(state=state, finished_at=now, **fields)
        if not updated:
            return False
        execution.refresh_from_db()
        not_before = execution.lease_expires_at if retry_after_lease else None
        return after_final(execution, now, not_before)


def after_final(
    execution: Execution, now: datetime, not_before: datetime | None = None
) -> Execution | None:
    """Count the outcome, create the retry the job's policy asks for, and
    update the job's health (with the events it causes) in the same
    transaction. A failing attempt that gets no retry lands in the dead
    letters, as its `execution.given_up` event says."""
    count_final(execution.state)
    if execution.state == Execution.LOST:
        audit.increment("croniq_executions_reaped_total", reason=execution.lost_reason or "unknown")
    retry = create_retry(execution, now, not_before)
    outcomes.settled(execution, now, retry)
    replaced = execution.cancel_requested_at is not None
    if retry is None and execution.state in outcomes.FAILING and not replaced:
        dead_letters.land(execution, now)
    if retry is None:
        overlap.promote(execution.job_id, now)  # the next queued instant's turn
        if not replaced:
            chains.after_settle(execution, now)  # its outcome is final: start what follows
    if execution.state == Execution.SUCCEEDED:
        requirements.after_success([execution.job_id], now)  # runs waiting for it
    return retry


def count_final(state: str, amount: int = 1) -> None:
    audit.increment("croniq_executions_total", amount, state=state)


def instant_attempts(execution: Execution) -> QuerySet:
    """The attempts of `execution`'s instant (its runner's, for a run pinned
    to one): those its retries count."""
    attempts = Execution.objects.filter(
        job_id=execution.job_id, scheduled_for=execution.scheduled_for
    )
    if execution.pinned_to:
        attempts = attempts.filter(pinned_to=execution.pinned_to)  # this runner's attempts
    return attempts


def retry_delay(execution: Execution) -> timedelta | None:
    """None when no retry is due; otherwise how long to wait before it runs."""
    attempts = instant_attempts(execution)
    if execution.cancel_requested_at is not None:
        return None  # an operator or a newer occurrence (replace) stopped it
    if execution.lost_reason == RUNNER_GONE:
        return None  # pinned to a runner that is not coming back for it
    if execution.state == Execution.LOST:
        # The runner vanished, not the job failing: retry at once, even when
        # the job has no retries, up to CRONIQ_LOST_RETRIES.
        lost = attempts.filter(state=Execution.LOST).count()
        return timedelta(0) if lost <= settings.CRONIQ_LOST_RETRIES else None
    if execution.state in (Execution.FAILED, Execution.TIMED_OUT):
        failures = attempts.filter(state__in=[Execution.FAILED, Execution.TIMED_OUT]).count()
        job = execution.job  # loaded only when its retry policy matters
        if failures > job.retries:
            return None
        return backoff(job.retry_backoff, failures)
    return None


def no_retry_if_lost(execution: Execution) -> str | None:
    """Why a running `execution` would get no retry were its lease to run
    out now, or None when it would get one: `retry_delay` of it as the
    reaper will settle it (lost, `lease_expired`), read before it is."""
    if execution.cancel_requested_at is not None:
        return "its cancel was requested"
    allowed = settings.CRONIQ_LOST_RETRIES
    earlier = instant_attempts(execution).filter(state=Execution.LOST).count()
    if earlier + 1 <= allowed:
        return None
    if not earlier:
        return "CRONIQ_LOST_RETRIES is 0"
    lost = "1 earlier attempt was" if earlier == 1 else f"{earlier} earlier attempts were"
    return f"{lost} lost (CRONIQ_LOST_RETRIES is {allowed})"


def backoff(first: int, failures: int) -> timedelta:
    """The wait before the retry after `failures` failures: `first` seconds,
    doubled for each failure after the first, at most MAX_RETRY_DELAY. The
    cap holds for rows stored before the job's bounds existed too: an
    uncapped wait overflowed, and the run's finish could not settle it."""
    doublings = min(failures - 1, MAX_RETRY_DELAY.bit_length())  # past this, the cap anyway
    return timedelta(seconds=min(first * 2**doublings, MAX_RETRY_DELAY))


def create_retry(
    execution: Execution, now: datetime, not_before: datetime | None = None
) -> Execution | None:
    """The retry the job's policy asks for; it runs no earlier than `not_before`."""
    delay = retry_delay(execution)
    if delay is None:
        if execution.state == Execution.LOST:
            # Its runners kept vanishing: nobody will run this instant now.
            audit.record(
                "execution.given_up",
                target=execution,
                at=now,
                data={"attempt": execution.attempt, "reason": execution.lost_reason},
                counter=("croniq_executions_given_up_total", {"reason": execution.lost_reason}),
            )
        return None
    run_after = now + delay
    if not_before is not None and not_before > run_after:
        run_after = not_before
    retry = next_attempt(execution, execution.attempt + 1, run_after, now)
    if retry is None:
        return None
    audit.record(
        "execution.retry",
        target=retry,
        at=now,
        data={
            "previous": execution.pk,
            "previous_state": execution.state,
            "attempt": retry.attempt,
            "run_after": retry.run_after.isoformat(),
        },
        counter=("croniq_retries_total", {"reason": execution.state}),
    )
    return retry


def next_attempt(
    execution: Execution, attempt: int, run_after: datetime, now: datetime
) -> Execution | None:
    """A pending retry of the same instant, or None when that attempt exists
    already or a singleton job has a live execution again."""
    try:
        with transaction.atomic():
            return Execution.objects.create(
                job=execution.job,
                scheduled_for=execution.scheduled_for,
                attempt=attempt,
                trigger=Execution.RETRY,
                singleton=execution.job.one_live,
                run_after=run_after,
                created_at=now,
                env=execution.env,  # a triggered run's overrides hold for its retries
                pinned_to=execution.pinned_to,  # a run on every runner retries on its own
            )
    except IntegrityError:
        return None


def confirm_kill(
    execution: Execution, now: datetime, actor: object | None = None
) -> Execution | None:
    """The runner of an execution settled without it (a server-side timeout)
    reports, under the execution's own lease, that its process has ended.

    A singleton's retry waited for the old lease to run out, in case the old
    process still ran (`settle(retry_after_lease=True)`); it is gone now, so
    the retry may run at once (never before its backoff). The caller checked
    the session, lease and token: a report under any other lease proves
    nothing. Returns the retry released, or None.
    """
    delay = retry_delay(execution)
    if delay is None:
        return None
    backoff_ends = execution.finished_at + delay
    released_at = max(now, backoff_ends)
    with transaction.atomic():
        retry = (
            Execution.objects.select_for_update()
            .filter(
                job_id=execution.job_id,
                scheduled_for=execution.scheduled_for,
                attempt=execution.attempt + 1,
                pinned_to=execution.pinned_to,
                state=Execution.PENDING,
                run_after__gt=released_at,
            )
            .first()
        )
        if retry is None:
            return None
        waited_until = retry.run_after
        retry.run_after = released_at
        retry.save(update_fields=["run_after"])
        audit.record(
            "execution.kill_confirmed",
            target=execution,
            actor=actor,
            at=now,
            data={
                "lease": execution.lease,
                "retry": retry.pk,
                "run_after": released_at.isoformat(),
                "instead_of": waited_until.isoformat(),
            },
        )
    return retry


def drop_pinned(execution: Execution, now: datetime) -> bool:
    """A pending run pinned to a runner that is gone becomes lost, without a
    retry; its occurrence may end with it (chains). Part of the caller's
    transaction; False when it was claimed or ended in the meantime."""
    updated = Execution.objects.filter(
        pk=execution.pk, state=Execution.PENDING, pinned_to=execution.pinned_to
    ).update(
        state=Execution.LOST,
        singleton=False,
        finished_at=now,
        lost_reason=RUNNER_GONE,
        error=f"runner {execution.pinned_to} went away before starting it",
    )
    if not updated:
        return False
    execution.refresh_from_db()
    audit.record(
        "execution.reaped",
        target=execution,
        at=now,
        data={"reason": RUNNER_GONE, "runner": execution.pinned_to, "retry": None},
    )
    after_final(execution, now)
    return True


def release(
    executions: QuerySet, reason: str, now: datetime, actor: object | None = None
) -> list[Execution]:
    """Mark running executions lost at once (takeover, forget, expired lease).

    Returns the executions actually released; ones that finished or moved on
    in the meantime are left alone.
    """
    released = []
    for execution in executions.filter(state=Execution.RUNNING).select_related("job"):
        if release_one(execution, executions, reason, now, actor):
            released.append(execution)
    return released


@transaction.atomic
def release_one(
    execution: Execution, within: QuerySet, reason: str, now: datetime, actor: object
) -> bool:
    """The state change and its audit event commit together (invariant 4)."""
    # `within`: a lease renewed since the read (heartbeat racing the
    # reaper) no longer matches "lease expired", so it is left alone.
    result = settle(execution, Execution.LOST, now, within=within, lost_reason=reason)
    if result is False:
        return False
    audit.record(
        "execution.reaped",
        target=execution,
        actor=actor,
        at=now,
        data={
            "reason": reason,
            "runner": execution.runner.name if execution.runner_id else None,
            "lease": execution.lease,
            "retry": result.pk if result else None,
        },
    )
    return True
