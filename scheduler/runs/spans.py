"""An execution's spans (docs/design.md §15): fire, claim, run and finish,
in the execution's trace (`Execution.traceparent`), handed to
`core.tracing` for export.

- **fire**: the execution created (by the loop's fire step, a trigger, a
  retry, a backfill...), from its `created_at` to the commit. The parent of
  the other three; a retry's is a child of the fire span of the attempt
  before it in the same trace, so a run and its retries make one tree.
- **claim**: a runner's poll claimed it, from the claim to its answer;
  again at each claim (work handed back is claimed again).
- **run**: from its start (`claimed_at`) to its end (`finished_at`), as the
  runner reported it; its id is the one the job's TRACEPARENT names.
- **finish**: the runner's finish report that settled it, from the call's
  start to its commit.

Every function returns at once when tracing is off (`tracing.enabled()`),
and reads nothing more from the database then. An execution stored before
trace contexts (no `traceparent`) has no spans.
"""

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction

from core import tracing
from scheduler.runs.models import Execution


def attributes(execution_id: int, attempt: int, job_name: str, **more: Any) -> dict[str, Any]:
    found = {
        "croniq.job": job_name,
        "croniq.execution.id": execution_id,
        "croniq.execution.attempt": attempt,
    }
    found.update({f"croniq.{key}": value for key, value in more.items() if value is not None})
    return found


def fired(executions: Iterable[Execution]) -> None:
    """The fire spans of `executions`, just saved (their job loaded),
    exported when the transaction that saved them commits."""
    if not tracing.enabled():
        return
    spans = []
    for execution in executions:
        context = tracing.parse(execution.traceparent)
        if execution.pk is None or context is None:
            continue  # not saved (another loop created it), or no trace
        spans.append(
            tracing.Span(
                "fire",
                context.trace_id,
                tracing.fire_span_id(context),
                earlier_fire(execution, context),
                tracing.nanoseconds(execution.created_at),
                0,  # at the commit
                attributes(
                    execution.pk,
                    execution.attempt,
                    execution.job.name,
                    **{
                        "execution.trigger": execution.trigger,
                        "execution.state": execution.state,
                        "execution.scheduled_for": execution.scheduled_for.isoformat(),
                        "execution.pinned_to": execution.pinned_to or None,
                    },
                ),
            )
        )
    if spans:
        transaction.on_commit(
            lambda: tracing.export(span._replace(end=tracing.now_ns()) for span in spans)
        )


def earlier_fire(execution: Execution, context: tracing.Context) -> int | None:
    """The fire span of the latest earlier attempt of the same run in the
    same trace (a retry's, a replay's predecessor), or None."""
    if execution.attempt <= 1:
        return None
    earlier = (
        Execution.objects.filter(
            job_id=execution.job_id,
            scheduled_for=execution.scheduled_for,
            pinned_to=execution.pinned_to,
            attempt__lt=execution.attempt,
            traceparent__startswith=f"00-{context.trace_id:032x}-",
        )
        .order_by("-attempt")
        .values_list("traceparent", flat=True)
        .first()
    )
    found = tracing.parse(earlier)
    return None if found is None else tracing.fire_span_id(found)


def claimed(runner_name: str, executions: Iterable[Execution], at: datetime) -> None:
    """The claim spans of `executions` (their job loaded), claimed at `at`
    for the runner `runner_name` and committed: they end now."""
    if not tracing.enabled():
        return
    end = tracing.now_ns()
    spans = []
    for execution in executions:
        context = tracing.parse(execution.traceparent)
        if context is None:
            continue
        spans.append(
            tracing.Span(
                "claim",
                context.trace_id,
                tracing.new_span_id(),
                tracing.fire_span_id(context),
                tracing.nanoseconds(at),
                end,
                attributes(
                    execution.pk,
                    execution.attempt,
                    execution.job.name,
                    runner=runner_name,
                    **{"execution.lease": execution.lease},
                ),
            )
        )
    tracing.export(spans)


# What the run and finish spans read of settled executions, written by
# hand: the ORM's query cost 0.5 ms of CPU to build on SQLite, as much as
# the finish it follows (bench/dispatch_latency.py, each run finished alone).
EXECUTIONS = Execution._meta.db_table
JOBS = Execution._meta.get_field("job").related_model._meta.db_table
RUNNERS = Execution._meta.get_field("runner").related_model._meta.db_table
FINISHED = f"""
    SELECT execution.id, execution.attempt, execution.traceparent, execution.state,
        execution.exit_code, execution.claimed_at, execution.finished_at, job.name, runner.name
    FROM {EXECUTIONS} execution
    JOIN {JOBS} job ON job.id = execution.job_id
    LEFT JOIN {RUNNERS} runner ON runner.id = execution.runner_id
    WHERE execution.id IN ({{ids}}) AND execution.traceparent <> ''
"""


def finished(ids: Iterable[int], at: datetime) -> None:
    """The run and finish spans of the executions `ids`, which a finish
    report received at `at` settled and committed: one read of them."""
    if not tracing.enabled():
        return
    ids = list(ids)
    if not ids:
        return
    end = tracing.now_ns()
    with connection.cursor() as cursor:
        cursor.execute(FINISHED.format(ids=", ".join(["%s"] * len(ids))), ids)
        rows = cursor.fetchall()
    spans = []
    for pk, attempt, traceparent, state, exit_code, claimed_at, finished_at, job, runner in rows:
        context = tracing.parse(traceparent)
        if context is None or finished_at is None:
            continue
        finished_at = aware(finished_at)
        outcome = attributes(
            pk,
            attempt,
            job,
            runner=runner,
            **{"execution.state": state, "execution.exit_code": exit_code},
        )
        fire = tracing.fire_span_id(context)
        started = aware(claimed_at) if claimed_at is not None else finished_at
        spans.append(
            tracing.Span(
                "run",
                context.trace_id,
                context.span_id,
                fire,
                tracing.nanoseconds(started),
                tracing.nanoseconds(finished_at),
                outcome,
                error=None if state == Execution.SUCCEEDED else state,
            )
        )
        spans.append(
            tracing.Span(
                "finish",
                context.trace_id,
                tracing.new_span_id(),
                fire,
                tracing.nanoseconds(at),
                end,
                outcome,
            )
        )
    tracing.export(spans)


def aware(instant: datetime | str) -> datetime:
    """A datetime column read with plain SQL: PostgreSQL's is aware, SQLite's
    naive (UTC, as Django stores it)."""
    if isinstance(instant, str):
        instant = datetime.fromisoformat(instant)
    return instant if instant.tzinfo is not None else instant.replace(tzinfo=UTC)
