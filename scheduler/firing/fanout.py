"""`run_on: all`: an occurrence runs on every matching runner (docs/design.md §10).

An occurrence of a run-on-all job becomes one execution per runner that is
online (not draining) when it fires and carries all the job's labels, each
pinned to its runner by name (`Execution.pinned_to`): only that runner
claims it, with its own lease, logs and result, and its retries stay
pinned to it. With `stagger`, the runners start that many seconds apart in
the order of their names. A runner that comes online later gets no past
occurrence; a run whose runner goes offline before starting it is lost
(`dispatch.loop_steps.drop_orphaned_pins`).

The occurrence's summary is the worst outcome of its runs (`worst`), and
its chains start once, when the last of its runs has ended (`chains`).

The scheduler imports nothing from the apps above it: an app config with a
`runners_for(labels)` method (-> names of the runners online now that carry
`labels`) answers, as `loop_steps` adds loop steps.
"""

from datetime import datetime, timedelta
from typing import Any

from django.apps import apps

from core import tracing
from scheduler.models import Execution, Job

# Worst first: the state an occurrence with runs in several states shows.
SEVERITY = (
    Execution.LOST,
    Execution.TIMED_OUT,
    Execution.FAILED,
    Execution.CANCELLED,
    Execution.RUNNING,
    Execution.PENDING,
    Execution.QUEUED,
    Execution.SUCCEEDED,
    Execution.SKIPPED,
)


def runners_for(labels: list[str]) -> list[str]:
    """Names of the runners online now that carry all of `labels`, sorted."""
    names = set()
    for config in apps.get_app_configs():
        find = getattr(config, "runners_for", None)
        if find is not None:
            names.update(find(list(labels or ())))
    return sorted(names)


def spread(
    execution: Execution, names: list[str] | None = None, now: datetime | None = None
) -> list[Execution]:
    """The executions of `execution`'s occurrence, unsaved: `execution`
    itself for a job that runs on one runner (or a run already pinned); for
    a run-on-all job one copy per runner of `names` (default: `runners_for`
    the job's labels), staggered. An empty list when no runner matches.

    The first runner's run keeps the occurrence's `run_after`, so lateness
    is still measured from the instant. The turns after it count from
    `now` when the occurrence fires late (a loop that was down or slow):
    a stagger exists to keep the runners apart, and counting from a past
    instant would start them all at once."""
    job = execution.job
    if job.run_on != Job.ALL or execution.pinned_to:
        return [execution]
    if names is None:
        names = runners_for(job.requirements)
    step = timedelta(seconds=job.stagger or 0)
    start = execution.run_after if now is None else max(execution.run_after, now)
    return [
        pinned(execution, name, execution.run_after if n == 0 else start + step * n)
        for n, name in enumerate(names)
    ]


def pinned(execution: Execution, name: str, run_after: datetime) -> Execution:
    """A copy of the unsaved `execution` for the runner `name`, ready at `run_after`."""
    fields = {
        f.attname: getattr(execution, f.attname)
        for f in Execution._meta.concrete_fields
        if not f.primary_key
    }
    copy = Execution(**fields)
    copy.job = execution.job
    copy.pinned_to = name
    # Each runner's run is a run of its own: its own trace (core.tracing).
    copy.traceparent = tracing.new_traceparent()
    copy.run_after = run_after
    return copy


def worst(states: Any) -> str | None:
    """The worst of `states` (see SEVERITY); None for none."""
    ranked = [SEVERITY.index(s) for s in states if s in SEVERITY]
    return SEVERITY[min(ranked)] if ranked else None


def occurrence_runs(execution: Execution) -> list[Execution]:
    """The latest attempt of each runner's run of `execution`'s occurrence,
    in the order of the runners' names; [] for a run that is not pinned."""
    if not execution.pinned_to:
        return []
    latest = {}
    runs = Execution.objects.filter(
        job_id=execution.job_id, scheduled_for=execution.scheduled_for
    ).exclude(pinned_to="")
    for run in runs.order_by("pinned_to", "attempt"):
        latest[run.pinned_to] = run
    return list(latest.values())


def summary(execution: Execution) -> dict[str, Any] | None:
    """{state: the worst, runs: [...], counts: {state: n}} of a pinned run's
    occurrence (the execution page), or None for a run that is not pinned."""
    runs = occurrence_runs(execution)
    if not runs:
        return None
    counts = {}
    for run in runs:
        counts[run.state] = counts.get(run.state, 0) + 1
    return {"state": worst(counts), "runs": runs, "counts": counts}
