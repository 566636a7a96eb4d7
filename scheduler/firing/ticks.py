"""The fire step: due jobs claimed in batches, their occurrences created as
executions, each job advanced to its next instant. Each unit takes `now` and
returns how much it did.

`scheduler_loop` runs the units as the scheduler's steps
(`SchedulerConfig.loop_steps`); tests call them with fixed instants.
Any number of loops may run at once: every unit claims its rows with a
conditional update or `select_for_update(skip_locked=True)`, and the unique
constraints on Execution are the backstop (docs/design.md §2).

Its parts: due.py (which jobs are due, when to wake, the fire lead),
misfires.py (due occurrences and the misfire policy), skips.py (occurrences
kept as skipped: maintenance, overlap), faults.py (what is blamed on a job,
quarantine) and timeouts.py (the timeouts step). The names the loop, the
apps and the tests use are importable from here.
"""

import logging
import weakref
from collections import defaultdict

from django.db import (
    DEFAULT_DB_ALIAS,
    IntegrityError,
    connection,
    connections,
    transaction,
)
from django.db.models import Max, prefetch_related_objects

import audit
from core import db
from core.framework_overrides import in_use
from scheduler.firing import fanout, notifier
from scheduler.firing.due import (
    FIRE_LEAD,
    LARGE_INSTANT,
    LARGE_LOOK_EVERY,
    LEAD_PER_JOB,
    LOOKAHEAD,
    MAX_FIRE_LEAD,
    NO_LEAD,
    Firing,
    Held,
    due_jobs,
    earliest_due,
    fire_lead_for,
    next_firing,
)
from scheduler.firing.faults import job_fault, quarantine
from scheduler.firing.misfires import apply_misfire_policy, due_occurrences, record_misfire
from scheduler.firing.skips import (
    inside_maintenance,
    load_maintenance,
    record_maintenance,
    record_skip,
)
from scheduler.firing.timeouts import expire_timeouts, next_timeout, time_out
from scheduler.models import Execution, Job
from scheduler.runs import overlap, requirements, spans

__all__ = [  # the names callers import from here, besides the fire step's own
    "FIRE_LEAD",
    "LARGE_INSTANT",
    "LARGE_LOOK_EVERY",
    "LEAD_PER_JOB",
    "LOOKAHEAD",
    "MAX_FIRE_LEAD",
    "NO_LEAD",
    "Firing",
    "Held",
    "advance_jobs",
    "due_jobs",
    "earliest_due",
    "expire_timeouts",
    "fire_due",
    "fire_lead_for",
    "job_fault",
    "last_job_edit",
    "lock_due_jobs",
    "mark_tick",
    "next_firing",
    "next_timeout",
    "record_misfire",
    "time_out",
    "trigger_due",
]

log = logging.getLogger("croniq.scheduler")

# Due jobs claimed per transaction.
TRIGGER_BATCH = 200


def trigger_due(now, lead=NO_LEAD, held=None):
    """Create the executions of every job due by `now + lead`; returns how
    many were created. `held` (a Held) names the jobs the last firing held
    back to their instant, and collects this firing's."""
    held = Held() if held is None else held
    if not due_jobs(now, lead, held).exists():
        # Most ticks fire nothing: a read, not a write transaction, which on
        # SQLite would wait for the database's one writer (the notifier's
        # deliveries in a burst). The held jobs stay held: still ahead.
        return 0
    return fire_due(now, lead, held)


def fire_due(now, lead, held, ahead=(), clock=None):
    """trigger_due for a caller that has just read that a job is due (the
    loop's fire step: its read of the earliest due job tells); the jobs of
    the `ahead` instants (`Firing.ahead`) fire too.

    With `clock` (the loop's), each batch after the first fires what is due
    by its own time: an instant that comes due while a large one is being
    fired (2,000 jobs: a second) goes next, the batches going by instant.
    """
    held.clear()
    created = 0
    while True:
        batch_created, claimed = trigger_batch(now, lead, held, ahead)
        created += batch_created
        if claimed < TRIGGER_BATCH:
            break
        if clock is not None:
            now = max(now, clock())
    return created


def trigger_batch(now, lead=NO_LEAD, held=None, ahead=()):
    """Claim up to TRIGGER_BATCH due jobs in one transaction and fire them.
    Returns (executions created, jobs claimed)."""
    held = Held() if held is None else held
    try:
        with transaction.atomic():
            jobs = lock_due_jobs(now, lead, held, ahead)
            holding = set(held)
            try:
                return fire_jobs(jobs, now, lead, bulk=True, held=held, ahead=ahead), len(jobs)
            except Exception:
                held.intersection_update(holding)  # rolled back: decided again below
                raise
    except Exception as e:
        if not job_fault(e):
            raise  # the database itself: the loop backs off
        # Another loop inserted one of these executions first (invariant 1's
        # backstop), or one job cannot be fired: redo the batch job by job so
        # the others still fire.
        log.info("a batch of due jobs failed to fire (%s); retrying one by one", e)
    created = claimed = 0
    due = due_jobs(now, lead, held, ahead).order_by("next_run_at").values_list("pk", flat=True)
    for job_id in list(due[:TRIGGER_BATCH]):
        created += fire_one(job_id, now, lead, held, ahead)
        claimed += 1
    return created, claimed


def fire_one(job_id, now, lead, held, ahead=()):
    """Fire one due job in a transaction of its own; a job that cannot be
    fired is quarantined instead of stopping the jobs after it."""
    try:
        with transaction.atomic():
            jobs = lock_due_jobs(now, lead, held, ahead, pk=job_id)
            return fire_jobs(jobs, now, lead, bulk=False, held=held, ahead=ahead)
    except Exception as e:
        if not job_fault(e):
            raise
        log.exception("job %s cannot be fired; quarantined", job_id)
        quarantine(job_id, f"{type(e).__name__}: {e}", now)
        return 0


def lock_due_jobs(now, lead=NO_LEAD, held=(), ahead=(), pk=None):
    """Due jobs (`due_jobs`; only job `pk`, if given), locked, with their
    calendars; ones another loop holds are skipped (PostgreSQL). SQLite
    needs no row locks: its IMMEDIATE transactions serialise writers.

    Written in SQL: on every firing tick the ORM's compiling of this query
    was a fifth of the firing's CPU (docs/performance.md). It must pick
    what `due_jobs` picks (tests/scheduler/test_ticks.py)."""
    adapt = connection.ops.adapt_datetimefield_value
    where = ["enabled = %s", "paused_at IS NULL"]
    params = [True, adapt(now + lead)]
    due = "next_run_at <= %s"
    if ahead:
        due = f"({due} OR next_run_at IN ({placeholders(ahead)}))"
        params.extend(adapt(instant) for instant in sorted(ahead))
    where.append(due)
    if held:
        where.append(f"(next_run_at <= %s OR id NOT IN ({placeholders(held)}))")
        params.append(adapt(now))
        params.extend(sorted(held))
    if pk is not None:
        where.append("id = %s")
        params.append(pk)
    sql = f"{JOB_SELECT} WHERE {' AND '.join(where)} ORDER BY next_run_at LIMIT {TRIGGER_BATCH}"
    sql += db.skip_locked_sql()
    jobs = read_jobs(sql, params)
    if any(job.calendar_id is not None for job in jobs):
        # One query. Without a calendar to read, the ORM would still build
        # one it does not send (0.18 ms of CPU for five jobs, every firing).
        prefetch_related_objects(jobs, "calendar")
    return jobs


# -- framework override: job_reader (core/framework_overrides.py) -----------


def read_jobs(sql, params):
    """The jobs a query of JOB_SELECT's columns finds, each value converted
    as the ORM converts it. `Job.objects.raw` did this, but matched the
    columns to the fields anew on every query: 60% of the locking query's
    CPU (cProfile). This reads the compiler's converters instead, an ORM
    internal: with the `job_reader` override off, or on a Django release it
    was not verified with, `Job.objects.raw` again."""
    if not in_use("job_reader"):
        return list(Job.objects.raw(sql, params))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    wrapper = connections[DEFAULT_DB_ALIAS]  # this thread's connection
    reading = JOB_READERS.get(wrapper)
    if reading is None:
        compiler = wrapper.ops.compiler("SQLCompiler")(
            Job.objects.none().query, wrapper, DEFAULT_DB_ALIAS
        )
        columns = [field.get_col(Job._meta.db_table) for field in Job._meta.concrete_fields]
        reading = JOB_READERS[wrapper] = (compiler, compiler.get_converters(columns))
    compiler, converters = reading
    if converters:
        rows = compiler.apply_converters(rows, converters)
    return [Job.from_db(DEFAULT_DB_ALIAS, JOB_FIELD_NAMES, list(values)) for values in rows]


# {database connection: (its compiler, the converters of the job's columns)}
JOB_READERS = weakref.WeakKeyDictionary()
JOB_FIELD_NAMES = [field.attname for field in Job._meta.concrete_fields]

# -- end of the job_reader override ------------------------------------------


def placeholders(values):
    return ", ".join(["%s"] * len(values))


# Every column of the job, whatever fields it gains.
JOB_SELECT = "SELECT {} FROM {}".format(
    ", ".join(f'"{field.column}"' for field in Job._meta.concrete_fields), Job._meta.db_table
)


def fire_jobs(jobs, now, lead, bulk, held=None, ahead=()):
    """Create the due executions of locked jobs and advance each job; a job
    whose policy must decide at the instant is left alone, its id added
    to `held`.

    Any error propagates: the caller rolls the batch back and fires its jobs
    one by one, quarantining the one that fails.
    """
    occupied = overlap.occupancy(jobs)
    pending, skipped, in_maintenance, replaced = [], [], [], []
    calendars = {}  # one CalendarRules per calendar for the whole batch
    down = load_maintenance(jobs, now)
    waiting = {}  # {job id: what a deferred occurrence coalesces into}
    rosters = {}  # {labels: runners}: the runners of run-on-all jobs, read once a batch
    gate = requirements.Gate(now)
    for job in jobs:
        # The calendar as it is now: a blackout added after next_run_at was
        # computed is honoured.
        job.next_run_at = job.due_instant(job.calendar_rules(shared=calendars))
        until = now + lead
        if job.next_run_at in ahead:
            until = max(until, job.next_run_at)  # fired ahead: that instant alone
        if job.overlap != Job.ALLOW and not overlap.clear_ahead(occupied.get(job.pk)):
            if job.next_run_at is not None and job.next_run_at > now:
                if held is not None:
                    held.add(job.pk)
                continue  # its open run decides the newcomer's fate at the instant
            until = now
        if job.requires:
            # Requirements are decided at the instant (scheduler.runs.requirements):
            # a success may still come in the lead.
            if job.next_run_at is not None and job.next_run_at > now:
                if held is not None:
                    held.add(job.pk)
                continue
            until = now
        occurrences = due_occurrences(job, now, until)
        for instant, trigger in apply_misfire_policy(job, occurrences, now):
            execution = new_execution(job, instant, trigger, now)
            window = down.covering(job.labels, instant)
            if window is not None:
                inside_maintenance(execution, window, occupied, waiting, pending, in_maintenance)
                if execution in pending:  # deferred to the window's end
                    pending[-1:] = fanout.spread(execution, roster(job, rosters), now)
                continue
            if not gate.admits(job, execution):
                continue  # waits, skipped or failed: saved by gate.record()
            verdict = overlap.admit(job, execution, occupied.get(job.pk))
            if verdict.action == overlap.SKIPPED:
                skipped.append((execution, verdict))
                continue
            runs = fanout.spread(execution, roster(job, rosters), now)
            if not runs:  # run_on: all, and no runner to run on
                skipped.append((execution, overlap.Verdict(overlap.SKIPPED, "no_runner")))
                continue
            pending.extend(runs)
            for old in verdict.replaces:
                if old.pk is None:  # an occurrence of this batch: never saved
                    pending.remove(old)
                    skipped.append((old, overlap.Verdict(overlap.SKIPPED, "superseded", instant)))
                else:
                    replaced.append((old, instant))
        if occurrences.last is not None:
            job.last_scheduled_at = occurrences.last
        job.next_run_at = occurrences.next_instant
        if job.max_runs is not None:
            count_runs(job, occurrences, now)
        elif job.next_run_at is None:
            audit.record("job.exhausted", target=job, at=now, data={"after": now.isoformat()})
    for old, instant in replaced:
        overlap.replace(old, f"for {instant.isoformat()}", now)
    created = save_executions(pending, bulk)
    gate.record()
    for execution, verdict in skipped:
        record_skip(execution, verdict, now)
    for execution, window, into in in_maintenance:
        record_maintenance(execution, window, into, now)
    spans.fired(
        [
            *pending,
            *(execution for execution, _ in skipped),
            *(execution for execution, _, _ in in_maintenance),
            *(execution for execution, _ in gate.unmet),
        ]
    )
    advance_jobs(jobs)
    if created:
        # In the transaction: the hint leaves with its commit (PostgreSQL's
        # NOTIFY; this process's hubs, after it), one round trip fewer.
        notify_runners()
    return created


def count_runs(job, occurrences, now):
    """A job with `max_runs`: its due occurrences counted; after the last
    one it completes, disabling itself (docs/design.md §14)."""
    job.scheduled_runs += occurrences.counted
    if job.completed:
        job.enabled = False
        last = job.last_scheduled_at
        data = {"max_runs": job.max_runs, "last": last.isoformat() if last else None}
        audit.record("job.completed", target=job, at=now, data=data)
    elif job.next_run_at is None:
        audit.record("job.exhausted", target=job, at=now, data={"after": now.isoformat()})


def roster(job, rosters):
    """The runners a run-on-all job's occurrences run on (None otherwise),
    read once per label set for the whole batch."""
    if job.run_on != Job.ALL:
        return None
    key = tuple(sorted(job.requirements))
    if key not in rosters:
        rosters[key] = fanout.runners_for(key)
    return rosters[key]


def advance_jobs(jobs):
    """Save the jobs' new instants: one UPDATE per distinct pair, since jobs
    due together mostly move together (cheaper than a CASE per row).

    Written in SQL, as `lock_due_jobs`: the ORM compiled each UPDATE anew,
    0.2 ms of CPU apiece, and jobs with phases of their own (`@every` jobs
    created apart) make one UPDATE each."""
    adapt = connection.ops.adapt_datetimefield_value
    groups = defaultdict(list)
    for job in jobs:
        groups[(job.last_scheduled_at, job.next_run_at)].append(job.pk)
    with connection.cursor() as cursor:
        for (last, upcoming), ids in groups.items():
            cursor.execute(
                f"{ADVANCE_JOBS} ({placeholders(ids)})", [adapt(last), adapt(upcoming), *ids]
            )
    for job in jobs:
        if job.max_runs is not None:  # few jobs: one UPDATE each
            Job.objects.filter(pk=job.pk).update(
                scheduled_runs=job.scheduled_runs, enabled=job.enabled
            )


ADVANCE_JOBS = 'UPDATE "{}" SET "{}" = %s, "{}" = %s WHERE "{}" IN'.format(
    Job._meta.db_table,
    Job._meta.get_field("last_scheduled_at").column,
    Job._meta.get_field("next_run_at").column,
    Job._meta.pk.column,
)


def new_execution(job, instant, trigger, now):
    return Execution(
        job=job,
        scheduled_for=instant,
        trigger=trigger,
        singleton=job.one_live,
        run_after=instant,
        created_at=now,
    )


def save_executions(executions, bulk):
    """Save them; returns how many this loop created (one by one, another
    loop may have created some first)."""
    if bulk:
        Execution.objects.bulk_create(executions)
        return len(executions)
    saved = 0
    for execution in executions:
        try:
            with transaction.atomic():
                execution.save()
            saved += 1
        except IntegrityError:
            log.info("%s: already created by another scheduler", execution)
    return saved


def notify_runners():
    """Wake waiting long-polls: a retry or a new execution may be theirs."""
    notifier.new_work()


def last_job_edit():
    """A marker that changes whenever a job is saved (the loop wakes on it)."""
    return Job.objects.aggregate(at=Max("updated_at"), n=Max("pk"))


def mark_tick(now):
    audit.mark_tick(now)
