"""Requirements at run time (docs/design.md §14): the fire step's gate,
runs waiting for their job's requirements, and their release.

An occurrence of the schedule (trigger `schedule` or `catch_up`) of a job
with `requires` is decided at its instant, under the job's row lock that
the fire step holds (the job is held back to its instant, never fired
ahead, `scheduler.firing.ticks`): met, it goes on to the overlap policy;
unmet, `requires_policy` decides (scheduler.jobs.requires): `wait` keeps it
`queued` with `requires_until` set, `skip` records it skipped, `fail` fails
it (`error: "requirements unmet"`, no retry, a dead letter, the failure's
events). Each unmet occurrence is audited and an event
(`execution.requirements_unmet`). Manual, chained, retried, replayed,
backfilled, register and webhook runs are not gated: someone or something
asked for that run.

A waiting run is released in the transaction that settles a success of a
job it requires (`after_success`, from every path that settles a success),
under its own job's row lock, and then meets its overlap policy as a new
occurrence would. The loop's step (`settle_waiting`, every few seconds)
skips the runs whose wait has ended and releases any a success did not
(one that committed while the fire step decided). A waiting run is no
occurrence for the overlap policy until released: `overlap` leaves it out.
"""

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Q

import audit
from core import db
from scheduler.firing import fanout, notifier
from scheduler.firing.due import as_instant
from scheduler.firing.skips import record_skip
from scheduler.jobs import requires
from scheduler.models import Execution, Job
from scheduler.runs import chains, events, outcomes, overlap
from scheduler.triage import dead_letters

# The occurrences requirements gate: the schedule's.
GATED = (Execution.SCHEDULE, Execution.CATCH_UP)
# A run waiting for its job's requirements: read through the exec_job_queued
# index, whose rows are the few queued runs.
WAITING = Q(state=Execution.QUEUED, requires_until__isnull=False)
UNMET_ERROR = "requirements unmet"
EVENT = "execution.requirements_unmet"
COUNTER = "croniq_requirements_unmet_total"
OUTCOMES = {requires.WAIT: "waiting", requires.SKIP: "skipped", requires.FAIL: "failed"}
# Runs of one job that may wait at once; beyond, an unmet occurrence is
# skipped (as CRONIQ_RUN_ALL_CAP bounds a misfire's catch-up runs).
MAX_WAITING = 100


def latest_successes(names: Iterable[str]) -> dict[str, datetime]:
    """{job name: when its latest success finished} of the jobs `names`
    (one without a success is absent): one query, each job's answer read
    from the end of the exec_job_state_finished index. Its state lists are
    literals: SQLite uses that partial index only for its very list, spelled
    so (dashboard.run_stats), and read a job's whole history otherwise."""
    names = sorted(set(names))
    if not names:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(LATEST_SUCCESSES.format(names=", ".join(["%s"] * len(names))), names)
        rows = cursor.fetchall()
    return {name: as_instant(at) for name, at in rows if at is not None}


LATEST_SUCCESSES = f"""
    SELECT job.name, (
        SELECT MAX(run.finished_at) FROM {Execution._meta.db_table} run
        WHERE run.job_id = job.id
          AND run.state IN ({", ".join(f"'{state}'" for state in Execution.SETTLED_STATES)})
          AND run.state = '{Execution.SUCCEEDED}')
    FROM {Job._meta.db_table} job WHERE job.name IN ({{names}})
"""


class Gate:
    """The fire step's requirement checks for one batch of locked jobs:
    each job's required successes read once, the occurrences turned away
    kept until the batch's runs are saved (`record`)."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.latest: dict[int, dict[str, datetime]] = {}
        self.waiting: dict[int, int] = {}  # {job id: its runs waiting}
        self.unmet: list[tuple[Execution, requires.Decision]] = []

    def admits(self, job: Job, execution: Execution) -> bool:
        """Whether the occurrence `execution` (unsaved) may go on to its
        overlap policy; otherwise it is kept for `record`."""
        if not job.requires or execution.trigger not in GATED:
            return True
        if job.pk not in self.latest:
            self.latest[job.pk] = latest_successes(requires.names(job.requires))
        missing = requires.unmet(job.requires, execution.scheduled_for, self.latest[job.pk])
        decision = requires.decide(job.requires_policy, job.requires_timeout, missing, self.now)
        if decision.action == requires.RUN:
            return True
        if decision.action == requires.WAIT:
            decision = self.room_to_wait(job, decision)
        self.unmet.append((execution, decision))
        return False

    def room_to_wait(self, job: Job, decision: requires.Decision) -> requires.Decision:
        """`decision` (to wait), or to skip when MAX_WAITING runs of the job
        wait already: a frequent job whose requirement stays unmet would
        otherwise pile up a run an occurrence for as long as its timeout."""
        if job.pk not in self.waiting:
            self.waiting[job.pk] = Execution.objects.filter(WAITING, job=job).count()
        if self.waiting[job.pk] >= MAX_WAITING:
            return requires.Decision(requires.SKIP, decision.unmet)
        self.waiting[job.pk] += 1
        return decision

    def record(self) -> None:
        for execution, decision in self.unmet:
            hold(execution, decision, self.now)


def hold(execution: Execution, decision: requires.Decision, now: datetime) -> None:
    """Save an occurrence whose requirements are unmet as its job's policy
    says (waiting, skipped or failed), audited, with its event."""
    execution.singleton = False  # not live: outside the singleton index
    if decision.action == requires.WAIT:
        execution.state = Execution.QUEUED
        execution.requires_until = decision.until
        execution.save()
    elif decision.action == requires.SKIP:
        skipped(execution, decision, now)
    else:
        failed(execution, now)
    policy = execution.job.requires_policy
    data = {"policy": policy, "outcome": OUTCOMES[decision.action]}
    data.update(facts(decision, execution.scheduled_for))
    if decision.until is not None:
        data["waiting_until"] = decision.until.isoformat()
    if policy == requires.WAIT and decision.action == requires.SKIP:
        data["waiting"] = MAX_WAITING  # runs of the job waiting already: no room
    unmet_event(execution, data, now)


def skipped(execution: Execution, decision: requires.Decision, now: datetime) -> None:
    execution.state = Execution.SKIPPED
    execution.finished_at = now
    execution.error = "skipped: requirements unmet: " + requires.describe(
        decision.unmet, execution.scheduled_for
    )
    execution.save()
    outcomes.counted(execution.job_id, Execution.SKIPPED)
    audit.increment("croniq_executions_total", state=Execution.SKIPPED)


def failed(execution: Execution, now: datetime) -> None:
    """The run fails for good without starting: no retry (a retry is not
    gated, so it would run without its requirements), a dead letter, the
    failure's events and the job's on_failure chain, as any run failing
    for good."""
    execution.state = Execution.FAILED
    execution.finished_at = now
    execution.error = UNMET_ERROR
    execution.save()
    audit.increment("croniq_executions_total", state=Execution.FAILED)
    outcomes.settled(execution, now)
    dead_letters.land(execution, now)
    chains.after_settle(execution, now)


def facts(decision: requires.Decision, instant: datetime) -> dict[str, Any]:
    return {
        "unmet": [
            {"job": need.job, "since": need.since(instant).isoformat()} for need in decision.unmet
        ]
    }


def unmet_event(execution: Execution, data: dict[str, Any], now: datetime) -> None:
    """Audited and emitted (a notification rule may route it)."""
    job = execution.job
    audit.record(EVENT, target=execution, at=now, data=data, counter=(COUNTER, {"job": job.name}))
    events.emit(EVENT, at=now, job=job, execution=execution, data=data)


# Waiting runs


def anything_waits() -> bool:
    """Whether any run waits for requirements: a read of the few queued
    runs (the exec_job_queued index), asked at every success. Written in
    SQL: the ORM's exists() cost 0.4 ms of CPU a success finish to compile,
    two thirds of the whole finish on SQLite."""
    with connection.cursor() as cursor:
        cursor.execute(ANYTHING_WAITS, [Execution.QUEUED])
        return cursor.fetchone() is not None


ANYTHING_WAITS = (
    f"SELECT 1 FROM {Execution._meta.db_table}"
    " WHERE state = %s AND requires_until IS NOT NULL LIMIT 1"
)


def queued_and_waiting(job_id: int) -> tuple[bool, bool]:
    """(whether job `job_id` has queued runs, whether any run waits for
    requirements): a success's two looks in one statement (SQLite's finish
    sends its steps one by one; PostgreSQL's has them in its CTE)."""
    with connection.cursor() as cursor:
        cursor.execute(QUEUED_AND_WAITING, [job_id, Execution.QUEUED, Execution.QUEUED])
        queued, waits = cursor.fetchone()
    return bool(queued), bool(waits)


QUEUED_AND_WAITING = f"SELECT EXISTS ({overlap.HAS_QUEUED}), EXISTS ({ANYTHING_WAITS})"


def after_success(job_ids: Iterable[int], now: datetime, waits: bool | None = None) -> int:
    """Release the waiting runs a success of the jobs `job_ids` may meet;
    part of the settle's transaction. `waits`: whether any run waits, when
    the caller has read it (the success's own statement, on PostgreSQL).
    Returns how many runs were decided."""
    if not (anything_waits() if waits is None else waits):
        return 0
    succeeded = set(Job.objects.filter(pk__in=list(job_ids)).values_list("name", flat=True))
    waiting = Execution.objects.filter(WAITING).values("job_id")
    decided = 0
    for job_id, needed in Job.objects.filter(pk__in=waiting).values_list("pk", "requires"):
        if succeeded.intersection(requires.names(needed)):
            decided += settle_waits(job_id, now)
    return decided


def settle_waiting(now: datetime) -> int:
    """The loop's step: every job's waiting runs decided again, each job
    in a transaction of its own. Returns how many were released or skipped."""
    job_ids = Execution.objects.filter(WAITING).values_list("job_id", flat=True).distinct()
    decided = 0
    for job_id in sorted(job_ids):
        with transaction.atomic():
            decided += settle_waits(job_id, now)
    return decided


def settle_waits(job_id: int, now: datetime) -> int:
    """Decide the waiting runs of one job under its row lock, oldest first:
    met, released; past their wait, skipped; else they wait on."""
    job = db.for_update(Job.objects.filter(pk=job_id)).first()
    if job is None:
        return 0
    runs = Execution.objects.filter(WAITING, job_id=job_id).order_by("scheduled_for", "id")
    runs = list(runs)
    if not runs:
        return 0  # decided by another process since it was read
    latest = latest_successes(requires.names(job.requires))
    occupied = overlap.occupancy([job]).get(job.pk)
    decided = 0
    for run in runs:
        run.job = job
        missing = requires.unmet(job.requires, run.scheduled_for, latest)
        decision = requires.decide(
            job.requires_policy, job.requires_timeout, missing, now, run.requires_until
        )
        if decision.action == requires.RUN:
            decided += release(job, run, occupied, now)
        elif decision.action == requires.SKIP:
            timed_out(run, decision, now)
            decided += 1
    return decided


def release(job: Job, run: Execution, occupied: Any, now: datetime) -> int:
    """A waiting run whose requirements are met meets its overlap policy as
    an occurrence would now: pending (on every runner for run_on: all),
    queued behind a live run, or skipped. Returns 1, or 0 when the
    database refused it (the step tries again)."""
    waited_since = run.created_at
    run.requires_until = None
    run.state = Execution.PENDING
    run.singleton = job.one_live
    # It starts now, not at its instant: the missed-run detector measures
    # lateness from here.
    run.run_after = max(run.run_after, now)
    verdict = overlap.admit(job, run, occupied)
    if verdict.action == overlap.SKIPPED:
        record_skip(run, verdict, now)
        return 1
    runs = fanout.spread(run)
    if not runs:
        record_skip(run, overlap.Verdict(overlap.SKIPPED, "no_runner"), now)
        return 1
    runs[0].pk = run.pk  # a run_on: all job's first runner takes the waiting row
    try:
        with transaction.atomic():
            for old in verdict.replaces:
                overlap.replace(old, f"for {run.scheduled_for.isoformat()}", now)
            for each in runs:
                each.save()
    except IntegrityError:
        return 0  # a live run the row lock does not guard (a retry): the step tries again
    audit.record(
        "execution.requirements_met",
        target=run,
        at=now,
        data={"state": run.state, "waited_since": waited_since.isoformat()},
    )
    transaction.on_commit(notifier.new_work)
    return 1


def timed_out(run: Execution, decision: requires.Decision, now: datetime) -> None:
    """A run whose wait ended unmet: skipped, audited and its event."""
    waited = (now - run.created_at).total_seconds()
    skipped(run, decision, now)
    audit.record(
        "execution.skipped",
        target=run,
        at=now,
        data={"reason": "requirements", "waited": waited},
    )
    data = {"policy": requires.WAIT, "outcome": "skipped", "waited": waited}
    data.update(facts(decision, run.scheduled_for))
    events.emit(EVENT, at=now, job=run.job, execution=run, data=data)


def waiting(job: Job) -> list[dict[str, Any]]:
    """The job's waiting runs, oldest first (at most 20), each with what it
    still lacks (the dashboard's job page)."""
    runs = list(Execution.objects.filter(WAITING, job=job).order_by("scheduled_for", "id")[:20])
    if not runs:
        return []
    latest = latest_successes(requires.names(job.requires))
    return [
        {
            "run": run,
            "until": run.requires_until,
            "unmet": [
                {"job": need.job, "since": need.since(run.scheduled_for)}
                for need in requires.unmet(job.requires, run.scheduled_for, latest)
            ],
        }
        for run in runs
    ]
