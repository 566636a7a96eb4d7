"""What runners do with the work handed to them: every write under a lease.

Claiming is in `dispatch.claims`, the long-poll in `dispatch.polls`. Every
write after the claim (hand-back, heartbeat, logs, finish) is conditional
on the execution id, the runner's session, the lease token and state
`running`. Nothing
matching means another claim, a takeover or the reaper got there first: the
call is answered 409, changes nothing, and the rejection is audited and
counted (invariant 3, fencing).
"""

import functools
import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F

import audit
from core import db
from dispatch import identity, settle_many
from dispatch.claims import lease_deadline
from dispatch.identity import Credential
from dispatch.notify import notify_new_work
from dispatch.refusals import Conflict, NotFound, Refused, TooLarge
from runners.models import RunnerToken
from scheduler.models import LOG_TRUNCATED_MARKER, Execution, LogChunk
from scheduler.runs import lifecycle, outcomes, requirements, spans

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_ERROR_CHARS = 10_000
# Final states a runner's finish call produces (not lost, not skipped).
FINISHED_BY_RUNNER = (
    Execution.SUCCEEDED,
    Execution.FAILED,
    Execution.TIMED_OUT,
    Execution.CANCELLED,
)


# -- handing back -----------------------------------------------------------


def hand_back(
    runner_id: int, session: str, assignments: Iterable[dict[str, Any]], now: datetime
) -> list[int]:
    """Put back work claimed for a poll whose runner hung up before the
    answer was sent.

    The runner never saw it, so it is pending again at once, the same
    attempt: not held until the lease runs out and then retried as lost.
    Only rows still held under the leases handed out change. Returns the
    ids handed back.
    """
    leases = {a["id"]: a["lease"] for a in assignments}
    with transaction.atomic():
        held = [
            e
            for e in Execution.objects.filter(
                pk__in=leases, runner_id=runner_id, session=session, state=Execution.RUNNING
            ).select_for_update(of=("self",))
            if e.lease == leases[e.pk]
        ]
        if not held:
            return []
        Execution.objects.filter(pk__in=[e.pk for e in held]).update(
            state=Execution.PENDING, runner=None, session="", lease_expires_at=None, claimed_at=None
        )
        for execution in held:
            audit.record(
                "execution.handed_back",
                target=execution,
                at=now,
                data={"runner_id": runner_id, "session": session, "lease": execution.lease},
                counter=("croniq_executions_handed_back_total", {}),
            )
    notify_new_work()
    return [e.pk for e in held]


def hand_back_unstarted(
    credential: Credential,
    runner_id: int,
    session: str,
    held: Iterable[tuple[int, int]],
    now: datetime,
) -> list[int]:
    """The runner's own hand-back: work it received but will not start (it
    is shutting down). `held` is [(execution id, lease)]; returns the ids
    handed back. Only work the calling session holds under those leases."""
    with transaction.atomic():
        _, runner = identity.caller(credential, runner_id, session, now)
        identity.touch(runner, now)
        assignments = [{"id": pk, "lease": lease} for pk, lease in held]
        return hand_back(runner.pk, session, assignments, now)


# -- heartbeat -------------------------------------------------------------


def heartbeat(
    credential: Credential,
    runner_id: int,
    session: str,
    held: Iterable[tuple[int, int]],
    now: datetime,
) -> dict[str, Any]:
    """Renew the leases the runner still holds.

    `held` is a list of (execution id, lease). Returns the contract's answer:
    renewed ids, lost ids (no longer held under that lease), cancel ids
    (held, but an operator asked to cancel them), and the new expiry.
    """
    deadline = lease_deadline(now)
    leases = {}
    for pk, lease in held:
        leases.setdefault(pk, lease)
    with transaction.atomic():
        _, runner = identity.caller(credential, runner_id, session, now)
        identity.touch(runner, now)
        rows = (
            Execution.objects.filter(
                pk__in=[pk for pk in leases if identity.is_db_id(pk)],
                runner=runner,
                session=session,
                state=Execution.RUNNING,
            )
            .select_for_update(of=("self",))
            .values_list("id", "lease", "cancel_requested_at")
        )
        kept = {pk: cancel for pk, lease, cancel in rows if leases[pk] == lease}
        if kept:
            Execution.objects.filter(pk__in=kept).update(lease_expires_at=deadline)
    return {
        "renewed": [pk for pk in leases if pk in kept],
        "lost": [pk for pk in leases if pk not in kept],
        "cancel": [pk for pk in leases if kept.get(pk) is not None],
        "lease_expires_at": deadline,
    }


# -- writes under a lease --------------------------------------------------


class StaleLease(Conflict):
    """A write under a lease the caller no longer holds."""

    def __init__(
        self,
        execution: Execution,
        token: RunnerToken,
        session: str,
        lease: int,
        call: str,
        at: datetime,
    ) -> None:
        super().__init__(
            f"execution {execution.pk} is not held under lease {lease} by this session"
        )
        self.execution, self.token, self.session = execution, token, session
        self.lease, self.call, self.at = lease, call, at

    def record(self) -> None:
        execution = self.execution
        audit.record(
            "execution.fencing_rejected",
            target=execution,
            actor=("runner", execution.runner.name if execution.runner_id else ""),
            at=self.at,
            data={
                "call": self.call,
                "token": self.token.name,
                "session": self.session,
                "lease": self.lease,
                "current_lease": execution.lease,
                "state": execution.state,
            },
            counter=("croniq_fencing_rejections_total", {}),
        )


def under_lease(execution: Execution, token: RunnerToken, session: str, lease: int) -> bool:
    """Whether the call comes from the session, lease and token that last held
    `execution`, whatever its state now."""
    return (
        execution.session == session
        and execution.lease == lease
        and execution.runner_id is not None
        and execution.runner.token_id == token.pk
    )


def holds(execution: Execution, token: RunnerToken, session: str, lease: int) -> bool:
    return execution.state == Execution.RUNNING and under_lease(execution, token, session, lease)


def find_execution(
    execution_id: int, lock: bool = False, with_max_output: bool = False
) -> Execution:
    found = Execution.objects.select_related("runner")
    if lock:
        found = found.select_for_update(of=("self",))
    if with_max_output:
        # Its job's, read in the same query (`log_limit`).
        found = found.annotate(job_max_output=F("job__max_output"))
    execution = found.filter(pk=execution_id).first() if identity.is_db_id(execution_id) else None
    if execution is None:
        raise NotFound(f"unknown execution {execution_id}")
    return execution


def audited(fn: Callable[..., T]) -> Callable[..., T]:
    """Record a StaleLease after the transaction that found it rolled back."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except StaleLease as stale:
            stale.record()
            raise

    return run


def clean_text(text: str) -> str:
    """Text the database can store: no NUL, no lone surrogates."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


@audited
def append_log(
    token: RunnerToken,
    execution_id: int,
    session: str,
    lease: int,
    seq: int,
    data: str,
    now: datetime,
) -> bool:
    """Append one chunk; a retried `seq` is accepted without a second row."""
    data = clean_text(data)
    size = len(data.encode("utf-8"))
    if size > settings.CRONIQ_LOG_CHUNK_LIMIT:
        raise TooLarge(
            f"log chunk of {size} bytes is above the {settings.CRONIQ_LOG_CHUNK_LIMIT} byte limit"
        )
    with transaction.atomic():
        execution = find_execution(execution_id, lock=True, with_max_output=True)
        if not holds(execution, token, session, lease):
            raise StaleLease(execution, token, session, lease, "logs", now)
        if LogChunk.objects.filter(execution=execution, seq=seq).exists():
            return False
        if execution.log_truncated:
            return False
        limit = log_limit(execution.job_max_output)
        stored, size, truncated = fit_log(data, size, execution.log_size, limit)
        try:
            with transaction.atomic():
                LogChunk.objects.create(execution=execution, seq=seq, data=stored)
        except IntegrityError:
            return False  # the same seq arrived twice at once
        Execution.objects.filter(pk=execution.pk).update(
            log_size=F("log_size") + size, log_truncated=truncated
        )
    return True


def log_limit(max_output: int | None) -> int:
    """The bytes of log kept for a run of a job with this `max_output`: the
    server's CRONIQ_LOG_LIMIT, lower when the job's limit is. An agent that
    announced `limits` sends no more (it keeps the output's head and tail
    within it); an older one sends it all, and the log is cut here
    (docs/design.md §15)."""
    limit: int = settings.CRONIQ_LOG_LIMIT
    return min(limit, max_output) if max_output else limit


def fit_log(data: str, size: int, used: int, limit: int) -> tuple[str, int, bool]:
    """(text to store, bytes counted, truncated) under the per-execution cap `limit`."""
    room = max(0, limit - used)
    if size <= room:
        return data, size, False
    kept = data.encode("utf-8")[:room].decode("utf-8", "ignore")
    return kept + LOG_TRUNCATED_MARKER.format(limit=limit), len(kept.encode("utf-8")), True


def outcome(execution: Execution, exit_code: int | None, timed_out: bool) -> str:
    if timed_out:
        return Execution.TIMED_OUT
    # The job's success_exit_codes as they are when the run ends (0 alone
    # unless it lists others): every agent reports the exit code as it came.
    if execution.job.succeeds_with(exit_code):
        return Execution.SUCCEEDED
    if execution.cancel_requested_at is not None:
        return Execution.CANCELLED
    return Execution.FAILED


def finish(
    credential: Credential,
    execution_id: int,
    session: str,
    lease: int,
    exit_code: int | None,
    error: str | None,
    timed_out: bool,
    now: datetime,
) -> str:
    """Settle the execution for the caller; returns its final state.

    A success, by far the most common finish, is one conditional write that
    checks the token, session, lease and state together. Anything else, and a
    success that write did not match, takes the full path, which tells the
    caller exactly why (401, 404, 409) or answers a retried finish.
    """
    error = clean_error(error)
    if exit_code == 0 and not timed_out:
        secret_hash = RunnerToken.hash_of(credential.secret)
        if finished_ok(secret_hash, execution_id, session, lease, error, now):
            spans.finished([execution_id], now)
            return Execution.SUCCEEDED
    token = identity.require_token(credential, now)
    return finish_held(token, execution_id, session, lease, exit_code, error, timed_out, now)


def finish_many(
    credential: Credential,
    runner_id: int,
    session: str,
    reports: Iterable[tuple[int, int, int | None, str | None, bool]],
    now: datetime,
) -> list[dict[str, Any]]:
    """The batch finish of runner `runner_id`: each report settled as
    `finish` settles it and answered on its own. The successes the caller
    holds are settled together, in one transaction (`settle_many`); every
    other report in its own, by the full finish.
    A refusal of one report (404, 409) is that report's status and detail;
    only the caller's own (401, 403, 404 for the runner) refuses the call.

    `reports` are (execution id, lease, exit code, error, timed out);
    returns one answer per report, in order.
    """
    token = identity.token_of_runner(credential, runner_id, now)
    reports = [
        (execution_id, lease, exit_code, clean_error(error), timed_out)
        for execution_id, lease, exit_code, error, timed_out in reports
    ]
    successes = [
        (execution_id, lease, error)
        for execution_id, lease, exit_code, error, timed_out in reports
        if exit_code == 0 and not timed_out
    ]
    # The successes held under their leases, together; the rest one by one
    # (a success left out is a retry or not held: the full path answers why).
    settled = settle_many.settle_successes(token.secret_hash, session, successes, now)
    spans.finished(settled, now)
    answers = []
    for execution_id, lease, exit_code, error, timed_out in reports:
        if execution_id in settled:
            settled.discard(execution_id)  # a report repeated in the call is answered as a retry
            answers.append({"id": execution_id, "status": 200, "state": Execution.SUCCEEDED})
            continue
        try:
            state = finish_held(
                token, execution_id, session, lease, exit_code, error, timed_out, now
            )
        except Refused as refusal:
            answers.append({"id": execution_id, "status": refusal.status, "detail": refusal.detail})
        else:
            answers.append({"id": execution_id, "status": 200, "state": state})
    return answers


def clean_error(error: str | None) -> str:
    return clean_text(error or "")[:MAX_ERROR_CHARS]


# The success finish, hand-written: compiling the equivalent ORM update (a
# filter across the runner to its token) cost more CPU than all the rest of
# the call. Same conditions as `lifecycle.settle` plus the caller's token;
# it returns the job's columns the rest of the finish needs.
EXECUTIONS, JOBS = settle_many.EXECUTIONS, settle_many.JOBS
SUCCEED_HELD = {
    # The job's row is joined once.
    "postgresql": f"""
        UPDATE {EXECUTIONS} execution
        SET state = %s, finished_at = %s, exit_code = 0, error = %s
        FROM {JOBS} job
        WHERE execution.id = %s AND execution.lease = %s AND execution.session = %s
          AND execution.state = %s AND execution.{settle_many.HELD_UNDER_TOKEN}
          AND job.id = execution.job_id AND {settle_many.ZERO_SUCCEEDS["postgresql"]}
        RETURNING execution.job_id, execution.pinned_to,
            job.concurrency_group_id, job.on_success, job.on_failure
    """,
    # The batch finish's statement for one report; its first column, the
    # execution's id, is dropped.
    "sqlite": settle_many.SUCCEED_ONE,
}
# PostgreSQL: the success, its plain health update (`outcomes.PLAIN_SUCCESS`)
# and whether the job has queued runs, in one round trip instead of three.
# Every part reads the snapshot from before the statement; the health row
# and the queued runs are not what the settling UPDATE writes.
HEALTH_AFTER_SETTLED = outcomes.PLAIN_SUCCESS.format(
    health=outcomes.HEALTH, jobs=f"{JOBS} job JOIN settled ON settled.job_id = job.id WHERE TRUE"
)
SUCCEED_HELD_PLAINLY = f"""
    WITH settled AS ({SUCCEED_HELD["postgresql"]}),
    plain AS ({HEALTH_AFTER_SETTLED} RETURNING 1)
    SELECT settled.*, EXISTS (SELECT 1 FROM plain), EXISTS (
        SELECT 1 FROM {EXECUTIONS} queued
        WHERE queued.job_id = settled.job_id AND queued.state = %s), EXISTS (
        SELECT 1 FROM {EXECUTIONS} waiting
        WHERE waiting.state = %s AND waiting.requires_until IS NOT NULL)
    FROM settled
"""


def finished_ok(
    secret_hash: str | None, execution_id: int, session: str, lease: int, error: str, now: datetime
) -> bool:
    """Settle a success in one write, if the caller (the token `secret_hash`)
    holds the execution."""
    if secret_hash is None or not identity.is_db_id(execution_id):
        return False
    params = [
        Execution.SUCCEEDED,
        connection.ops.adapt_datetimefield_value(now),
        error,
        execution_id,
        lease,
        session,
        Execution.RUNNING,
        secret_hash,
    ]
    with transaction.atomic():
        with connection.cursor() as cursor:
            # By design: one round trip on PostgreSQL (a CTE), three on SQLite.
            if db.on_postgres():
                health = [params[1], Execution.SUCCEEDED, Execution.QUEUED, Execution.QUEUED]
                cursor.execute(SUCCEED_HELD_PLAINLY, params + health)
                settled = cursor.fetchone()
            else:
                cursor.execute(SUCCEED_HELD[db.vendor()], params)
                settled = cursor.fetchone()
                if settled is not None:
                    settled = settled[1:]
                    job_id = settled[0]
                    settled += (outcomes.succeeded_plainly(job_id, now),)
                    settled += requirements.queued_and_waiting(job_id)
        if settled is None:
            return False
        *columns, plain, queued, waits = settled
        row = settle_many.Settled(execution_id, *columns)
        settle_many.follow_up(
            [row],
            plain={row.job_id} if plain else set(),
            queued=[row.job_id] if queued else [],
            now=now,
            waits=waits,
        )
    return True


@audited
def finish_held(
    token: RunnerToken,
    execution_id: int,
    session: str,
    lease: int,
    exit_code: int | None,
    error: str,
    timed_out: bool,
    now: datetime,
) -> str:
    """The full finish: read the execution, check the lease, settle.

    A retried finish of the same lease that was already accepted answers the
    same state again instead of 409.
    """
    execution = find_execution(execution_id)
    if not holds(execution, token, session, lease):
        if confirms_kill(execution, token, session, lease):
            actor = ("runner", execution.runner.name)
            if lifecycle.confirm_kill(execution, now, actor=actor):
                notify_new_work()
            return execution.state
        if already_finished(execution, token, session, lease, exit_code):
            return execution.state
        raise StaleLease(execution, token, session, lease, "finish", now)
    state = outcome(execution, exit_code, timed_out)
    if state != Execution.SUCCEEDED and lease_lapsed(execution, now):
        return reap_late(execution, now)
    result = lifecycle.settle(execution, state, now, exit_code=exit_code, error=error)
    if result is False:
        execution.refresh_from_db()
        raise StaleLease(execution, token, session, lease, "finish", now)
    spans.finished([execution.pk], now)
    if result is not None or execution.job.concurrency_group_id is not None:
        notify_new_work()  # a retry, or room in a concurrency group
    return state


def lease_lapsed(execution: Execution, now: datetime) -> bool:
    return execution.lease_expires_at is not None and execution.lease_expires_at < now


def reap_late(execution: Execution, now: datetime) -> str:
    """A failure reported under a lease that has run out is settled as the
    reaper would have settled it: lost, and retried. The runner kills a job
    whose lease it could not renew and reports that kill only after the
    lease must have run out, counting on the reaper to have settled the run
    first; with no loop reaping at that moment (dead, restarting, or behind)
    the kill would otherwise pass for the job's own failure and the
    scheduled instant would never run. A success under a lapsed lease is
    still accepted: nothing else has run the instant yet."""
    lapsed = Execution.objects.filter(pk=execution.pk, lease_expires_at__lt=now)
    if lifecycle.release(lapsed, lifecycle.LEASE_EXPIRED, now):
        spans.finished([execution.pk], now)
        notify_new_work()
    execution.refresh_from_db()
    return execution.state


def confirms_kill(execution: Execution, token: RunnerToken, session: str, lease: int) -> bool:
    """The end of a run the server timed out, reported by the runner that
    held it under that lease: its process is gone (see lifecycle.confirm_kill)."""
    return execution.state == Execution.TIMED_OUT and under_lease(execution, token, session, lease)


def already_finished(
    execution: Execution, token: RunnerToken, session: str, lease: int, exit_code: int | None
) -> bool:
    return (
        execution.state in FINISHED_BY_RUNNER
        and execution.exit_code == exit_code
        and under_lease(execution, token, session, lease)
    )
