"""Chains: a job's run that settles starts other jobs (docs/design.md §10).

`on_success` names the jobs to run when a run succeeds; `on_failure` those
to run when it fails for good (failed, timed out or lost with no retry
left). Each downstream run is created in the same transaction as the
settle, with trigger `chain`, the upstream's `scheduled_for` as its logical
time, `upstream` pointing at the run that started it, and
CRONIQ_UPSTREAM_EXECUTION_ID in its environment; the downstream job's own
overlap policy decides whether it runs, waits or is skipped. A cycle is
refused when a job is saved (admin, apply, API), naming it.

A run-on-all job's occurrence (one run per runner, `scheduler.firing.fanout`)
chains once, when the last of its runs has ended, to the worst outcome of
them: `on_success` when every runner succeeded, `on_failure` when one failed
for good.

A chained run deeper than MAX_CHAIN_DEPTH links below the run that began
its chain is not created (audited and logged): saves refuse cycles, but a
cycle written past them (into the database by hand, or stored before the
check took its lock) would otherwise chain for ever.
"""

import logging
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Max

import audit
from scheduler.firing import fanout, notifier
from scheduler.models import Execution, Job
from scheduler.runs import overlap
from scheduler.runs.refusals import OperationRefused

UPSTREAM_ENV = "CRONIQ_UPSTREAM_EXECUTION_ID"
FAILING = (Execution.FAILED, Execution.TIMED_OUT, Execution.LOST)
# Chains a person writes are a few links long; a hundred means a cycle.
MAX_CHAIN_DEPTH = 100

logger = logging.getLogger(__name__)


def after_settle(execution: Execution, now: datetime) -> list[Execution]:
    """Start the jobs `execution`'s job chains to its final outcome; part of
    the settle's transaction. Returns the runs created."""
    job = execution.job
    state = execution.state if not execution.pinned_to else occurrence_outcome(execution)
    if state == Execution.SUCCEEDED:
        names = job.on_success
    elif state in FAILING:
        names = job.on_failure
    else:
        return []
    if not names:
        return []
    depth = chain_depth(execution, MAX_CHAIN_DEPTH) + 1  # of the runs it would start
    return [run for name in names if (run := start(name, execution, now, depth)) is not None]


def chain_depth(execution: Execution, limit: int) -> int:
    """How many upstream links lead to `execution` (0: nothing chained it),
    counted up to `limit`: one query walking `upstream` by primary key."""
    table = connection.ops.quote_name(Execution._meta.db_table)
    upstream = connection.ops.quote_name(Execution._meta.get_field("upstream").column)
    sql = (
        f"WITH RECURSIVE up (id, depth) AS ("
        f" SELECT {upstream}, 1 FROM {table} WHERE id = %s AND {upstream} IS NOT NULL"
        f" UNION ALL"
        f" SELECT e.{upstream}, up.depth + 1 FROM {table} e JOIN up ON e.id = up.id"
        f" WHERE e.{upstream} IS NOT NULL AND up.depth < %s"
        f") SELECT COALESCE(MAX(depth), 0) FROM up"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [execution.pk, limit])
        return cursor.fetchone()[0]


def occurrence_outcome(execution: Execution) -> str | None:
    """The worst outcome of a pinned run's occurrence once all its runs have
    ended; None while one is still open.

    Runs of one occurrence end in separate transactions (on PostgreSQL, at
    the same moment on two web processes): each takes the job's row lock
    first, so the last to end sees the others' outcomes and chains alone.
    """
    if not (execution.job.on_success or execution.job.on_failure):
        return None
    overlap.lock(execution.job_id)
    states = [run.state for run in fanout.occurrence_runs(execution)]
    if any(state in Execution.OPEN_STATES for state in states):
        return None
    return fanout.worst(states)


def start(name: str, upstream: Execution, now: datetime, depth: int = 1) -> Execution | None:
    """One downstream run of the job `name`, `depth` links below the run
    that began its chain, or None (gone, its policy refused it, or the chain
    too deep: audited either way)."""
    job = Job.objects.filter(name=name).first()
    reason = None
    if job is None:
        reason = "no such job"
    elif not job.enabled:
        reason = "disabled"
    elif depth > MAX_CHAIN_DEPTH:
        reason = f"the chain is more than {MAX_CHAIN_DEPTH} runs deep (a cycle of chains?)"
        logger.warning("%s not chained after execution %s: %s", name, upstream.pk, reason)
    if reason is None:
        highest = Execution.objects.filter(job=job, scheduled_for=upstream.scheduled_for).aggregate(
            n=Max("attempt")
        )["n"]
        run = Execution(
            job=job,
            scheduled_for=upstream.scheduled_for,
            attempt=(highest or 0) + 1,
            trigger=Execution.CHAIN,
            run_after=now,
            created_at=now,
            upstream=upstream,
            env={UPSTREAM_ENV: str(upstream.pk)},
        )
        try:
            with transaction.atomic():
                overlap.enter(job, run, now)
        except (OperationRefused, IntegrityError) as e:
            reason = str(e) or "its overlap policy refused it"
        else:
            record(upstream, name, now, execution=run.pk)
            transaction.on_commit(notifier.new_work)
            return run
    record(upstream, name, now, skipped=reason)
    return None


def record(upstream: Execution, name: str, now: datetime, **data: Any) -> None:
    audit.record(
        "job.chained",
        target=upstream,
        at=now,
        data={"upstream": upstream.pk, "state": upstream.state, "job": name, **data},
    )
