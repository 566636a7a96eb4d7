"""What a settled execution means for its job: the health record and the
events an operator may want to hear about (docs/design.md §9).

Called inside the transaction that settles the execution
(`lifecycle.after_final`, and the success fast path in dispatch.leases), so
the streak, the counts and the events commit with the state change or not at
all.
"""

from datetime import datetime

from django.db import connection

import audit
from scheduler.jobs.job_health import JobHealth
from scheduler.models import Execution, Job
from scheduler.runs import events

FAILING = (Execution.FAILED, Execution.TIMED_OUT, Execution.LOST)
ATTEMPT_EVENTS = {
    Execution.FAILED: "execution.failed",
    Execution.TIMED_OUT: "execution.timed_out",
    Execution.LOST: "execution.lost",
}


def settled(execution: Execution, now: datetime, retry: Execution | None = None) -> None:
    """Update the job's health for `execution`, just settled, and emit the
    events it causes. `retry`: the attempt created after it, if any; a
    failing attempt without one has failed for good (`execution.given_up`)."""
    health = locked_health(execution.job_id)
    state = execution.state
    if state in JobHealth.COUNTED_STATES:
        setattr(health, state, getattr(health, state) + 1)
    health.last_state = state
    if state == Execution.SUCCEEDED:
        succeeded(health, execution, now)
    elif state in FAILING:
        failed(health, execution, now, given_up=retry is None)
    health.save()


def succeeded(health: JobHealth, execution: Execution, now: datetime) -> None:
    health.last_success_at = now
    if health.failure_streak:
        events.emit(
            "job.recovered",
            at=now,
            job=execution.job,
            execution=execution,
            data={
                "streak": health.failure_streak,
                "failing_since": iso(health.failing_since),
            },
        )
        health.failure_streak, health.failing_since = 0, None
    minimum = execution.job.min_duration
    duration = execution.duration
    if minimum is not None and duration is not None and duration.total_seconds() < minimum:
        events.emit(
            "job.fast",
            at=now,
            job=execution.job,
            execution=execution,
            data={"duration": duration.total_seconds(), "min_duration": minimum},
        )


def failed(health: JobHealth, execution: Execution, now: datetime, given_up: bool) -> None:
    health.last_failure_at = now
    job = execution.job
    events.emit(ATTEMPT_EVENTS[execution.state], at=now, job=job, execution=execution)
    if not given_up:
        return
    health.failure_streak += 1
    health.failing_since = health.failing_since or now
    events.emit(
        "execution.given_up",
        at=now,
        job=job,
        execution=execution,
        data={"attempts": execution.attempt},
    )
    events.emit(
        "job.failing",
        at=now,
        job=job,
        execution=execution,
        data={"streak": health.failure_streak, "failing_since": iso(health.failing_since)},
    )
    pause_if_failing(job, health.failure_streak, execution, now)


def pause_if_failing(job: Job, streak: int, execution: Execution, now: datetime) -> bool:
    """`pause_after_failures: N`: a job whose streak reached N pauses itself,
    audited and as a `job.paused` event, in the transaction that settled the
    run. An operator's resume lets it try again; the next failure of the
    same streak pauses it again."""
    limit = job.pause_after_failures
    if not limit or streak < limit:
        return False
    reason = f"paused after {limit} consecutive failures"
    paused = Job.objects.filter(pk=job.pk, paused_at__isnull=True).update(
        paused_at=now, paused_until=None, pause_reason=reason, next_run_at=None, updated_at=now
    )
    if not paused:
        return False  # an operator paused it already
    job.withdraw_ahead(now)
    data = {"reason": reason, "streak": streak, "pause_after_failures": limit}
    audit.record("job.paused", target=job, actor="scheduler", at=now, data=data)
    events.emit("job.paused", at=now, job=job, execution=execution, data=data)
    return True


def counted(job_id: int, state: str) -> None:
    """Count an execution that ended without running: skipped (its singleton
    job was still live) or cancelled while pending."""
    health = locked_health(job_id)
    setattr(health, state, getattr(health, state) + 1)
    health.last_state = state
    health.save(update_fields=[state, "last_state"])


def locked_health(job_id: int) -> JobHealth:
    health, _ = JobHealth.objects.select_for_update().get_or_create(job_id=job_id)
    return health


# The success fast path (dispatch.leases.finished_ok) settles most runs in
# one hand-written write; this is its health update, as plain: a job with no
# streak to end and no minimum duration to check needs only its count and
# last success moved (its row created on its first run). Anything else
# takes `settled`.
# `jobs` names the jobs succeeded (aliased `job`); its parameters follow
# the two below.
PLAIN_SUCCESS = """
    INSERT INTO {health} AS health (
        job_id, succeeded, last_success_at, last_state, failure_streak,
        failed, timed_out, lost, cancelled, skipped)
    SELECT job.id, 1, %s, %s, 0, 0, 0, 0, 0, 0
    FROM {jobs} AND job.min_duration IS NULL
    ON CONFLICT (job_id) DO UPDATE
    SET succeeded = health.succeeded + 1,
        last_success_at = excluded.last_success_at,
        last_state = excluded.last_state
    WHERE health.failure_streak = 0
"""
HEALTH = JobHealth._meta.db_table
SUCCESS_PLAIN = PLAIN_SUCCESS.format(
    health=HEALTH, jobs=f"{Job._meta.db_table} job WHERE job.id = %s"
)


def succeeded_plainly(job_id: int, now: datetime) -> bool:
    """The health update of a success that needs no event; False when the
    job needs more (a streak ends, a minimum duration to check)."""
    params = [connection.ops.adapt_datetimefield_value(now), Execution.SUCCEEDED, job_id]
    with connection.cursor() as cursor:
        cursor.execute(SUCCESS_PLAIN, params)
        return cursor.rowcount == 1


def iso(instant: datetime) -> str | None:
    return instant.isoformat() if instant else None
