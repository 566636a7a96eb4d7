"""The scheduler's units of work. Each takes `now` and returns how much it did.

`scheduler_loop` runs them as the scheduler's steps (`SchedulerConfig.loop_steps`);
tests call them with fixed instants.
Any number of loops may run at once: every unit claims its rows with a
conditional update or `select_for_update(skip_locked=True)`, and the unique
constraints on Execution are the backstop (docs/design.md §2).
"""

import logging
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    DatabaseError,
    DataError,
    IntegrityError,
    connection,
    connections,
    transaction,
)
from django.db.models import Min, Q, prefetch_related_objects

import audit
from scheduler.firing import fanout, notifier
from scheduler.models import Execution, Job
from scheduler.runs import lifecycle, maintenance, outcomes, overlap

log = logging.getLogger("croniq.scheduler")

# Due jobs claimed per transaction.
TRIGGER_BATCH = 200
# Characters of a quarantined job's error kept on the job (the audit keeps all).
QUARANTINE_REASON_CHARS = 2000
JOB_ERRORS = "croniq_job_errors_total"
# Occurrences enumerated one by one before a long outage is treated in bulk.
ENUMERATION_LIMIT = 1000
# How long before its instant the loop creates a job's execution. Nothing
# runs early (an execution is claimed only from its run_after on), but the
# row and the runners' wake-up are ready at the instant instead of tens of
# milliseconds after it. A job with an overlap policy other than allow fires
# ahead only when none of its runs is open (pending, running or queued), the
# usual case: nothing can start in between but a manual run, which its row
# lock and the singleton index turn away. With a run open, what it means
# for the newcomer (skip, queue, replace) is decided at the instant: the job
# is held back until then (`Held`).
FIRE_LEAD = timedelta(milliseconds=200)
NO_LEAD = timedelta(0)
# An instant shared by more jobs than LARGE_INSTANT fires earlier still, by
# LEAD_PER_JOB for each job past it and at most MAX_FIRE_LEAD ahead: the web
# processes claim its runs and hand them out ahead in proportion
# (`runners.hub.claim_ahead`), and several hundred answers take longer than
# FIRE_LEAD leaves. The margin over the claim's lead leaves the loops time to
# create the rows (bench/top_of_band.py: 2,000 at the top of an hour).
LARGE_INSTANT = 100
LEAD_PER_JOB = timedelta(microseconds=2000)
MAX_FIRE_LEAD = timedelta(seconds=5)
# The loop counts the jobs of the instants this far ahead, and looks again
# this often while its earliest job is that near (a quiet loop otherwise
# trusts its read for EARLIEST_REREAD_EVERY): a large instant's lead never
# begins before the next look.
LARGE_LOOK_EVERY = timedelta(seconds=5)
LOOKAHEAD = MAX_FIRE_LEAD + LARGE_LOOK_EVERY


class Held(set):
    """Ids of the jobs held back to their instant by the last firing (a run
    of theirs was open within the lead): not fired ahead again, and the
    loop wakes for them at the instant, not the lead before it."""


def fire_lead_for(jobs, lead=FIRE_LEAD):
    """How long before an instant shared by `jobs` jobs they fire (`lead`
    for most; none for a caller that fires at the instant)."""
    if not lead or jobs <= LARGE_INSTANT:
        return lead
    return max(lead, min(lead + (jobs - LARGE_INSTANT) * LEAD_PER_JOB, MAX_FIRE_LEAD))


def due_jobs(now, lead=NO_LEAD, held=(), ahead=()):
    """Active jobs due by `now + lead`, or whose next instant is one of
    `ahead` (large instants fired earlier); those in `held` only by `now`."""
    due = Q(next_run_at__lte=now + lead)
    if ahead:
        due |= Q(next_run_at__in=sorted(ahead))
    if held:
        due &= Q(next_run_at__lte=now) | ~Q(pk__in=list(held))
    return Job.objects.filter(due, enabled=True, paused_at__isnull=True)


def earliest_due(now, lead=NO_LEAD, held=()):
    """When the loop must next wake to fire a job: the earliest next_run_at
    of any active job, `lead` earlier but for the `held` ones."""
    active = Job.objects.filter(enabled=True, paused_at__isnull=True, next_run_at__isnull=False)
    if not held:
        # One MIN that reads the first row of the `job_due` index.
        at = active.aggregate(at=Min("next_run_at"))["at"]
        return at and at - lead
    held = list(held)
    ahead = active.exclude(pk__in=held).aggregate(at=Min("next_run_at"))["at"]
    at_instant = active.filter(pk__in=held).aggregate(at=Min("next_run_at"))["at"]
    return min((at for at in (ahead and ahead - lead, at_instant) if at), default=None)


@dataclass(frozen=True)
class Firing:
    """What the loop read of the coming firings: when it must wake (`at`,
    None: no active job), the large instants within LOOKAHEAD, each with
    its own lead (`fire_lead_for`), and when to read them again
    (`recheck`: a large instant may come within reach before `at`)."""

    at: object = None
    large: tuple = ()  # ((instant, lead), ...)
    recheck: object = None

    def ahead(self, now):
        """The large instants whose lead has begun at `now`."""
        return frozenset(instant for instant, lead in self.large if instant - lead <= now)


def next_firing(now, lead=NO_LEAD, held=()):
    """earliest_due, brought forward for a large instant within LOOKAHEAD.
    The instants are counted only when the earliest due job is that near: at
    rest this is the one query it was."""
    at = earliest_due(now, lead, held)
    if at is None or not lead:
        return Firing(at)
    if at > now + LOOKAHEAD:
        return Firing(at, recheck=at - LOOKAHEAD)
    large = tuple(large_instants(now, lead))
    wake = min([at] + [instant - ahead for instant, ahead in large])
    return Firing(wake, large, recheck=now + LARGE_LOOK_EVERY)


# Hand-written: compiling the ORM's grouped count cost three times its
# round trip, on every read of the coming firings (a busy loop's: each
# second). The held jobs count too: they fire at the instant, but an
# instant's size only sets how early the rest fire.
SHARED_INSTANTS = f"""
    SELECT next_run_at, COUNT(*) FROM {Job._meta.db_table}
    WHERE enabled = %s AND paused_at IS NULL AND next_run_at > %s AND next_run_at <= %s
    GROUP BY next_run_at HAVING COUNT(*) > %s
""".strip()


def large_instants(now, lead):
    """[(instant, its lead)] of the instants within LOOKAHEAD shared by
    more than LARGE_INSTANT active jobs."""
    adapt = connection.ops.adapt_datetimefield_value
    params = [True, adapt(now), adapt(now + LOOKAHEAD), LARGE_INSTANT]
    with connection.cursor() as cursor:
        cursor.execute(SHARED_INSTANTS, params)
        rows = cursor.fetchall()
    return [(as_instant(instant), fire_lead_for(count, lead)) for instant, count in rows]


def as_instant(value):
    """A datetime column as a raw cursor reads it (SQLite's is text, in UTC)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass
class Occurrences:
    """The instants of one job that came due by `now`, split by misfire grace."""

    on_time: list = field(default_factory=list)
    missed: list = field(default_factory=list)
    missed_uncounted: bool = False  # an outage too long to enumerate
    last: object = None  # the last due instant
    next_instant: object = None  # the first instant after now: the new next_run_at


def due_occurrences(job, now, until=None):
    """The instants due by `until` (default `now`); misfires are judged at `now`."""
    until = now if until is None else until
    grace = timedelta(seconds=settings.CRONIQ_MISFIRE_GRACE)
    result = Occurrences()
    instant = job.next_run_at
    enumerated = 0
    while instant is not None and instant <= until:
        if enumerated == ENUMERATION_LIMIT and not result.missed_uncounted:
            # Too many missed instants to list: jump to the grace window (on
            # an `@every` job's grid, as its previews counted).
            result.missed_uncounted = True
            instant = job.first_fire_after(now - grace - timedelta(microseconds=1))
            continue
        (result.missed if now - instant > grace else result.on_time).append(instant)
        result.last = instant
        enumerated += 1
        instant = job.next_fire_after(instant)
    result.next_instant = instant
    return result


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


def job_fault(error):
    """Whether `error` is about the job's own rows or values (quarantine it)
    rather than about the database (lost connection, lock timeout, schema:
    the loop backs off and retries, no job is blamed)."""
    if isinstance(error, DatabaseError):
        return isinstance(error, (IntegrityError, DataError))
    return isinstance(error, Exception)


def quarantine(job_id, reason, now):
    """Take a job that cannot be fired out of the schedule, with the reason.

    Saving it in the admin or resuming it clears the error. Nothing else is
    read or written for healthy jobs: a quarantined job only leaves the
    `job_due` index through its NULL next_run_at.
    """
    with transaction.atomic():
        job = Job.objects.filter(pk=job_id).first()
        if job is None:
            return False
        Job.objects.filter(pk=job_id).update(
            error=reason[:QUARANTINE_REASON_CHARS], error_at=now, next_run_at=None
        )
        audit.record(
            "job.error",
            target=job,
            at=now,
            data={"error": reason, "next_run_at": iso(job.next_run_at)},
            counter=(JOB_ERRORS, {"job": job.name}),
        )
    return True


def iso(instant):
    return instant.isoformat() if instant else None


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
    if connection.features.has_select_for_update_skip_locked:
        sql += " FOR UPDATE SKIP LOCKED"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        jobs = read_jobs(cursor.fetchall())
    if any(job.calendar_id is not None for job in jobs):
        # One query. Without a calendar to read, the ORM would still build
        # one it does not send (0.18 ms of CPU for five jobs, every firing).
        prefetch_related_objects(jobs, "calendar")
    return jobs


def read_jobs(rows):
    """Jobs from rows of JOB_SELECT's columns, each value converted as the
    ORM converts it. `Job.objects.raw` did this, but matched the columns to
    the fields anew on every query: 60% of the locking query's CPU
    (cProfile)."""
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
        occurrences = due_occurrences(job, now, until)
        for instant, trigger in apply_misfire_policy(job, occurrences, now):
            execution = new_execution(job, instant, trigger, now)
            window = down.covering(job.labels, instant)
            if window is not None:
                inside_maintenance(execution, window, occupied, waiting, pending, in_maintenance)
                if execution in pending:  # deferred to the window's end
                    pending[-1:] = fanout.spread(execution, roster(job, rosters))
                continue
            verdict = overlap.admit(job, execution, occupied.get(job.pk))
            if verdict.action == overlap.SKIPPED:
                skipped.append((execution, verdict))
                continue
            runs = fanout.spread(execution, roster(job, rosters))
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
        if job.next_run_at is None:
            audit.record("job.exhausted", target=job, at=now, data={"after": now.isoformat()})
    for old, instant in replaced:
        overlap.replace(old, f"for {instant.isoformat()}", now)
    created = save_executions(pending, bulk)
    for execution, verdict in skipped:
        record_skip(execution, verdict, now)
    for execution, window, into in in_maintenance:
        record_maintenance(execution, window, into, now)
    advance_jobs(jobs)
    if created:
        # In the transaction: the hint leaves with its commit (PostgreSQL's
        # NOTIFY; this process's hubs, after it), one round trip fewer.
        notify_runners()
    return created


def roster(job, rosters):
    """The runners a run-on-all job's occurrences run on (None otherwise),
    read once per label set for the whole batch."""
    if job.run_on != Job.ALL:
        return None
    key = tuple(sorted(job.labels or ()))
    if key not in rosters:
        rosters[key] = fanout.runners_for(key)
    return rosters[key]


def load_maintenance(jobs, now):
    """The maintenance as stored, with the windows that may cover the
    earliest instant these jobs fire for (a late one is judged at its instant)."""
    if not jobs:
        return maintenance.Maintenance()
    earliest = min((job.next_run_at for job in jobs if job.next_run_at), default=now)
    return maintenance.load(now, since=min(earliest, now))


def inside_maintenance(execution, window, occupied, waiting, pending, skipped):
    """An occurrence inside a maintenance: skipped (added to `skipped`), or,
    with `maintenance: defer`, one pending run at the window's end (added
    to `pending`) that the later occurrences coalesce into (skipped, naming
    it). No burst follows the window: one run, whatever it covered."""
    job = execution.job
    if job.maintenance != Job.DEFER:
        skipped.append((execution, window, None))
        return
    live = occupied.get(job.pk)
    into = waiting.get(job.pk) or (live and live.holder()) or pending_of(job)
    if into:
        skipped.append((execution, window, into))
        return
    # Claims hold it while the maintenance lasts; a window's end is when
    # it may run (the switch: as soon as it is off).
    if window.end is not None:
        execution.run_after = max(execution.run_after, window.end)
    waiting[job.pk] = f"for {execution.scheduled_for.isoformat()}"
    if live is not None:
        live.live.append(execution)
    pending.append(execution)
    audit.record(
        "execution.deferred",
        target=job,
        at=execution.created_at,
        data={
            "scheduled_for": execution.scheduled_for.isoformat(),
            "run_after": execution.run_after.isoformat(),
            "maintenance": window.describe(),
        },
    )


def pending_of(job):
    """A pending execution of `job` a deferred occurrence may coalesce into."""
    pk = (
        Execution.objects.filter(job=job, state=Execution.PENDING)
        .values_list("pk", flat=True)
        .first()
    )
    return f"{pk} pending" if pk else None


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


def apply_misfire_policy(job, occurrences, now):
    """[(instant, trigger)] to fire; records the misfire when instants are dropped."""
    on_time = [(t, Execution.SCHEDULE) for t in occurrences.on_time]
    missed = occurrences.missed
    if not missed and not occurrences.missed_uncounted:
        return on_time
    if job.misfire_policy == Job.RUN_ALL:
        cap = settings.CRONIQ_RUN_ALL_CAP
        catch_up = [(t, Execution.CATCH_UP) for t in missed][-cap:]
        dropped = len(missed) - len(catch_up)
        fired = catch_up + on_time
    elif job.misfire_policy == Job.RUN_ONCE and not on_time:
        fired = [(missed[-1], Execution.CATCH_UP)] if missed else []
        dropped = len(missed) - len(fired)
    else:  # skip, or run_once with an on-time occurrence that covers the gap
        fired = on_time
        dropped = len(missed)
    record_misfire(job, missed, dropped, occurrences.missed_uncounted, now)
    return fired


def record_misfire(job, missed, dropped, uncounted, now):
    audit.record(
        "job.misfire",
        target=job,
        at=now,
        data={
            "policy": job.misfire_policy,
            "missed": len(missed),
            "dropped": dropped,
            "more_than_listed": uncounted,
            "first_missed": missed[0].isoformat() if missed else None,
        },
        counter=("croniq_misfires_total", {"job": job.name}),
    )


SKIP_REASONS = {
    "singleton": "singleton job still has a live execution {holder}",
    "queue_full": "the job's queue is full (max_queue), behind {holder}",
    "superseded": "replaced by the later occurrence {holder} before it started",
    "no_runner": "run on all matching runners, and no runner with its labels was online",
}


def record_skip(execution, verdict, now):
    """An occurrence its job's overlap policy turned away (a live run, a
    full queue, a later occurrence replacing it): kept as a skipped
    execution so history shows it, audited and counted."""
    holder = verdict.holder.isoformat() if hasattr(verdict.holder, "isoformat") else verdict.holder
    execution.state = Execution.SKIPPED
    execution.singleton = False  # not live, so outside the singleton index
    execution.finished_at = now
    execution.error = "skipped: " + SKIP_REASONS[verdict.reason].format(holder=holder)
    execution.save()
    outcomes.counted(execution.job_id, Execution.SKIPPED)
    audit.increment("croniq_executions_total", state=Execution.SKIPPED)
    if verdict.reason == "singleton":
        counter = ("croniq_singleton_skips_total", {"job": execution.job.name})
    elif verdict.reason == "no_runner":
        counter = ("croniq_fanout_unserved_total", {"job": execution.job.name})
    else:
        counter = ("croniq_overlap_skips_total", {"job": execution.job.name})
    audit.record(
        "execution.skipped",
        target=execution,
        at=now,
        data={"reason": verdict.reason, "live": holder},
        counter=counter,
    )


def record_maintenance(execution, window, into, now):
    """An occurrence inside a maintenance, kept as a skipped execution so
    history shows it, audited and counted; `into`: the deferred run it
    coalesced into."""
    where = window.describe()
    execution.state = Execution.SKIPPED
    execution.singleton = False  # not live, so outside the singleton index
    execution.finished_at = now
    execution.error = f"skipped: {where}" + (f", coalesced into execution {into}" if into else "")
    execution.save()
    outcomes.counted(execution.job_id, Execution.SKIPPED)
    audit.increment("croniq_executions_total", state=Execution.SKIPPED)
    data = {"reason": "maintenance", "maintenance": where}
    if into:
        data["coalesced_into"] = into
    audit.record(
        "execution.skipped",
        target=execution,
        at=now,
        data=data,
        counter=("croniq_maintenance_skips_total", {"job": execution.job.name}),
    )


def expire_timeouts(now):
    """Time out running executions past their timeout (plus grace) on the
    server side, whether or not their runner is still there."""
    grace = timedelta(seconds=settings.CRONIQ_TIMEOUT_GRACE)
    expired = 0
    running = Execution.objects.filter(
        state=Execution.RUNNING, job__timeout__isnull=False, claimed_at__isnull=False
    ).select_related("job")
    for execution in running:
        deadline = execution.claimed_at + timedelta(seconds=execution.job.timeout) + grace
        if deadline > now:
            continue
        try:
            expired += time_out(execution, now)
        except Exception as e:
            if not job_fault(e):
                raise
            log.exception("execution %s: cannot time it out; the others go on", execution.pk)
    if expired:
        notify_runners()
    return expired


def next_timeout(now):
    """When expire_timeouts may next find an overdue execution (`Step.until`):
    the earliest deadline of a running execution with a timeout, and at the
    latest the grace from now (a run that starts later is claimed at its
    start, and its deadline is its timeout and the grace after that)."""
    grace = timedelta(seconds=settings.CRONIQ_TIMEOUT_GRACE)
    running = Execution.objects.filter(
        state=Execution.RUNNING, job__timeout__isnull=False, claimed_at__isnull=False
    ).values_list("claimed_at", "job__timeout")
    return min([now + grace, *(at + timedelta(seconds=t) + grace for at, t in running)])


@transaction.atomic
def time_out(execution, now):
    """Settle one overdue execution; the change and its audit event commit together."""
    error = f"timed out on the server after {execution.job.timeout}s (runner did not finish)"
    # Its runner may still be running it: a singleton's retry waits until
    # the runner has killed it, at the latest when its lease runs out.
    settled = lifecycle.settle(
        execution, Execution.TIMED_OUT, now, retry_after_lease=execution.singleton, error=error
    )
    if settled is False:
        return False
    audit.record("execution.timed_out", target=execution, at=now, data={"error": error})
    return True


def notify_runners():
    """Wake waiting long-polls: a retry or a new execution may be theirs."""
    notifier.new_work()


def last_job_edit():
    """A marker that changes whenever a job is saved (the loop wakes on it)."""
    from django.db.models import Max

    return Job.objects.aggregate(at=Max("updated_at"), n=Max("pk"))


def mark_tick(now):
    audit.mark_tick(now)
