"""Jobs that run on register (`run_on_register`, docs/design.md §13): cron's
@reboot for runners.

When a runner registers a new session (a new agent process: its first
start, a restart, or another process taking its name over; not the same
process registering again after an outage or to refresh its settings),
each active job whose labels it carries gets one run pinned to it
(`Execution.pinned_to`), trigger `register`, its instant the registration.
The run is created in the registration's transaction and then goes the
normal way: pending, claimed by that runner's next poll (a maintenance
holds it as any other run), settled, retried (still pinned), chained. Its
job's overlap policy admits it as it admits a manual run.

Not started, each audited as `job.register_run_skipped` with the reason:
a run for a job that already has one waiting on this runner from an
earlier session, or that run's retry (a runner restarting faster than it
takes its work, or flapping, does not pile them up; a run the restart
interrupted is lost and retried at once, and that retry stands for this
start's run), a runner whose agent did not announce a
feature the job needs (it could never take the run: docs/design.md §4), and
a run the overlap policy refuses. A paused, disabled or quarantined job
gets none, and none later: the start has passed.
"""

from datetime import datetime

from django.db import IntegrityError, transaction

import audit
from dispatch.coverage import lacking
from dispatch.notify import notify_new_work
from runners.models import Runner, split_requirements
from scheduler.models import Execution, Job
from scheduler.runs import overlap
from scheduler.runs.refusals import OperationRefused

STARTED = "job.register_run"
SKIPPED = "job.register_run_skipped"


def start(runner: Runner, now: datetime) -> list[Execution]:
    """Create the register runs of `runner`'s new session (in the caller's
    transaction, which holds the runner's row); returns them."""
    jobs = Job.objects.filter(
        run_on_register=True, enabled=True, paused_at__isnull=True, error=""
    ).order_by("name")
    fits = runner.fits
    created = []
    for job in jobs:
        if not frozenset(job.labels or ()) <= fits:
            continue  # not this runner's job
        reason = refusal(job, runner, fits)
        execution = None if reason else enter(job, runner, now)
        if isinstance(execution, str):
            reason, execution = execution, None
        if reason:
            audit.record(SKIPPED, target=job, actor=runner, at=now, data={"reason": reason})
            continue
        assert execution is not None
        created.append(execution)
        audit.record(
            STARTED,
            target=job,
            actor=runner,
            at=now,
            data={"execution": execution.pk, "runner": runner.name},
        )
    if created:
        transaction.on_commit(notify_new_work)
    return created


def refusal(job: Job, runner: Runner, fits: frozenset[str]) -> str | None:
    """Why `runner` gets no register run of `job` now, or None."""
    _, missing = split_requirements(job.requirements - fits)
    if missing:
        falls_short, remedy = lacking(missing, one=True)
        return (
            f"runner {runner.name}'s agent {falls_short} {', '.join(missing)} "
            f"(version {runner.version or 'unknown'}): {remedy}"
        )
    mine = Execution.objects.filter(job=job, pinned_to=runner.name)
    # A register run and its retries share its instant (the registration).
    starts = mine.filter(trigger=Execution.REGISTER).values("scheduled_for")
    waiting = mine.filter(scheduled_for__in=starts, state__in=(Execution.QUEUED, Execution.PENDING))
    if waiting.exists():
        return f"a register run from an earlier start still waits on runner {runner.name}"
    return None


def enter(job: Job, runner: Runner, now: datetime) -> Execution | str:
    """The saved run, or why its overlap policy refused it."""
    execution = Execution(
        job=job,
        scheduled_for=now,
        trigger=Execution.REGISTER,
        run_after=now,
        created_at=now,
        pinned_to=runner.name,
    )
    try:
        with transaction.atomic():  # a savepoint: the registration goes on
            return overlap.enter(job, execution, now)
    except OperationRefused as refused:
        return str(refused)
    except IntegrityError:
        return f"{job.name} already has a live execution"
