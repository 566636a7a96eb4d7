"""The successes of a batch finish, settled in one transaction.

The runs of a batch that succeeded under the caller's lease are settled
together: one UPDATE of the executions (a loop of the single finish's on
SQLite, where a statement costs no round trip), one upsert of their jobs'
health rows, one look for queued runs, one count and one commit, where a
finish of each took four statements and a commit apiece (the commit's flush
of the log was a sixth of a web process's time under load). What this does
not settle (a failure, a lease not held) is left to `dispatch.finish`,
report by report.

Rows are locked in one order, as the single finish locks them: the
caller's executions, then the jobs' health rows by job id, then the
counter. Two batches never wait on each other's rows in opposite orders.
"""

import collections
from collections.abc import Collection, Iterable
from datetime import datetime

from django.db import connection, transaction

from core import db
from dispatch import identity
from dispatch.notify import notify_new_work
from runners.models import Runner, RunnerToken
from scheduler.jobs.job_health import JobHealth
from scheduler.models import Execution, Job
from scheduler.runs import chains, lifecycle, outcomes, overlap, requirements

EXECUTIONS, JOBS = Execution._meta.db_table, Job._meta.db_table
HELD_UNDER_TOKEN = f"""runner_id IN (
        SELECT runner.id FROM {Runner._meta.db_table} runner
        JOIN {RunnerToken._meta.db_table} token ON token.id = runner.token_id
        WHERE token.secret_hash = %s AND token.revoked_at IS NULL)"""
# Exit code 0 is a success of the job `job`: it lists no success_exit_codes,
# or lists 0 among them (`Job.succeeds_with`). A job that lists others alone
# is settled by the full finish, which fails its exit code 0.
ZERO_SUCCEEDS = {
    "postgresql": "(job.success_exit_codes = '[]'::jsonb "
    "OR job.success_exit_codes @> '[0]'::jsonb)",
    "sqlite": "(job.success_exit_codes = '[]' OR EXISTS ("
    "SELECT 1 FROM json_each(job.success_exit_codes) WHERE json_each.value = 0))",
}
# PostgreSQL: every report in one statement, the job's columns joined once.
SUCCEED_ALL = f"""
    UPDATE {EXECUTIONS} execution
    SET state = %s, finished_at = %s, exit_code = 0, error = report.error
    FROM (VALUES {{rows}}) AS report (id, lease, error), {JOBS} job
    WHERE execution.id = report.id AND execution.lease = report.lease
      AND execution.session = %s AND execution.state = %s
      AND execution.{HELD_UNDER_TOKEN} AND job.id = execution.job_id
      AND {ZERO_SUCCEEDS["postgresql"]}
    RETURNING execution.id, execution.job_id, execution.pinned_to,
        job.concurrency_group_id, job.on_success, job.on_failure
"""
REPORT_ROW = "(CAST(%s AS bigint), CAST(%s AS bigint), CAST(%s AS text))"
# SQLite: one report a statement (RETURNING cannot name a joined table).
SUCCEED_ONE = f"""
    UPDATE {EXECUTIONS}
    SET state = %s, finished_at = %s, exit_code = 0, error = %s
    WHERE id = %s AND lease = %s AND session = %s AND state = %s AND {HELD_UNDER_TOKEN}
      AND EXISTS (SELECT 1 FROM {JOBS} job
        WHERE job.id = {EXECUTIONS}.job_id AND {ZERO_SUCCEEDS["sqlite"]})
    RETURNING id, job_id, pinned_to,
        (SELECT job.concurrency_group_id FROM {JOBS} job WHERE job.id = {EXECUTIONS}.job_id),
        (SELECT job.on_success FROM {JOBS} job WHERE job.id = {EXECUTIONS}.job_id),
        (SELECT job.on_failure FROM {JOBS} job WHERE job.id = {EXECUTIONS}.job_id)
"""
# The plain health update (`outcomes.PLAIN_SUCCESS`) of several jobs at
# once, each by its number of successes, in job order; returns the jobs it
# updated. The others need the full update (a streak ends, a minimum
# duration to check).
PLAIN_SUCCESSES = f"""
    WITH settled (job_id, runs) AS (VALUES {{rows}})
    INSERT INTO {JobHealth._meta.db_table} AS health (
        job_id, succeeded, last_success_at, last_state, failure_streak,
        failed, timed_out, lost, cancelled, skipped)
    SELECT job.id, settled.runs, %s, %s, 0, 0, 0, 0, 0, 0
    FROM {JOBS} job JOIN settled ON settled.job_id = job.id
    WHERE job.min_duration IS NULL
    ORDER BY job.id
    ON CONFLICT (job_id) DO UPDATE
    SET succeeded = health.succeeded + excluded.succeeded,
        last_success_at = excluded.last_success_at,
        last_state = excluded.last_state
    WHERE health.failure_streak = 0
    RETURNING job_id
"""
JOB_ROW = "(CAST(%s AS bigint), CAST(%s AS integer))"
QUEUED_JOBS = f"SELECT DISTINCT job_id FROM {EXECUTIONS} WHERE state = %s AND job_id IN ({{ids}})"
NO_CHAIN = (None, "", "[]", [])

Settled = collections.namedtuple("Settled", "id job_id pinned_to group on_success on_failure")


def settle_successes(
    secret_hash: str | None,
    session: str,
    reports: Iterable[tuple[int, int, str]],
    now: datetime,
) -> set[int]:
    """Settle the successes `reports` ((execution id, lease, error)) that the
    caller (the token `secret_hash`) holds under those leases; returns the
    ids settled. A report it leaves out changed nothing."""
    unique = {}
    for execution_id, lease, error in reports:
        if identity.is_db_id(execution_id):
            unique.setdefault(execution_id, (execution_id, lease, error))
    if secret_hash is None or not unique:
        return set()
    with transaction.atomic():
        settled = succeed_held(secret_hash, session, list(unique.values()), now)
        if settled:
            runs = collections.Counter(row.job_id for row in settled)
            follow_up(settled, plain_successes(runs, now), queued_jobs(runs), now)
    return {row.id for row in settled}


def succeed_held(
    secret_hash: str, session: str, reports: list[tuple[int, int, str]], now: datetime
) -> list[Settled]:
    """The executions settled, in job order (the order their health rows lock)."""
    at = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        # By design: PostgreSQL settles the batch in one statement, SQLite one by one.
        if db.on_postgres():
            params = [Execution.SUCCEEDED, at, *(value for report in reports for value in report)]
            params += [session, Execution.RUNNING, secret_hash]
            rows = ", ".join([REPORT_ROW] * len(reports))
            cursor.execute(SUCCEED_ALL.format(rows=rows), params)
            found = cursor.fetchall()
        else:
            found = []
            for execution_id, lease, error in reports:
                params = [Execution.SUCCEEDED, at, error, execution_id, lease, session]
                cursor.execute(SUCCEED_ONE, [*params, Execution.RUNNING, secret_hash])
                found += cursor.fetchall()
    return sorted((Settled(*row) for row in found), key=lambda row: (row.job_id, row.id))


def follow_up(
    settled: list[Settled],
    plain: set[int],
    queued: set[int],
    now: datetime,
    waits: bool | None = None,
) -> None:
    """What follows the successes `settled`, in their transaction: the full
    health update of the jobs not in `plain` (those whose plain update was
    taken), the jobs they start, the turn of the `queued` jobs' runs, the
    runs waiting for them (`waits`: whether any run waits for requirements,
    when the caller has read it), the count. The single finish and the
    batch share it."""
    for row in settled:
        execution = None
        if row.job_id not in plain:
            # A streak ends, or a minimum duration to check: the full update.
            execution = Execution.objects.select_related("job").get(pk=row.id)
            outcomes.settled(execution, now)
        # The jobs it starts on success; a run on every runner may end its
        # occurrence as a failure (another runner's run failed).
        if row.on_success not in NO_CHAIN or (row.pinned_to and row.on_failure not in NO_CHAIN):
            execution = execution or Execution.objects.select_related("job").get(pk=row.id)
            chains.after_settle(execution, now)
    for job_id in queued:
        overlap.promote(job_id, now, known_queued=True)  # wakes the polls
    if waits is not False:
        requirements.after_success({row.job_id for row in settled}, now, waits)
    if any(row.group is not None for row in settled):
        notify_new_work()  # room in a group: waiting polls may take its work
    # Last: the counter's row stays locked until the commit, and another
    # process's thread on the same shard waits for it meanwhile.
    lifecycle.count_final(Execution.SUCCEEDED, amount=len(settled))


def plain_successes(runs: collections.Counter, now: datetime) -> set[int]:
    """The jobs of `runs` ({job id: successes}) whose health took the plain update."""
    params = [value for job_id in sorted(runs) for value in (job_id, runs[job_id])]
    params += [connection.ops.adapt_datetimefield_value(now), Execution.SUCCEEDED]
    with connection.cursor() as cursor:
        cursor.execute(PLAIN_SUCCESSES.format(rows=", ".join([JOB_ROW] * len(runs))), params)
        return {job_id for (job_id,) in cursor.fetchall()}


def queued_jobs(runs: Collection[int]) -> set[int]:
    with connection.cursor() as cursor:
        ids = ", ".join(["%s"] * len(runs))
        cursor.execute(QUEUED_JOBS.format(ids=ids), [Execution.QUEUED, *sorted(runs)])
        return sorted(job_id for (job_id,) in cursor.fetchall())
