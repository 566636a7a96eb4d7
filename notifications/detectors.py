"""Events that no single state change causes, found by looking: a run going
on too long (job.slow), an instant that passed its grace without starting
(job.missed), pending work that no online runner can take (labels.unserved).

Each detector is a loop step (`NotificationsConfig.loop_steps`): it takes
`now`, reads what is live through the scheduler's indexes (running
executions, pending ones by run_after, recently finished ones by
finished_at), and returns how many events it emitted. Every event carries a
`key` naming what it reports and the threshold it crossed, so the Event.key
unique constraint reports it once however often the step runs and however
many loops run it (`detection.emit_new`). Keys already recorded are looked
up (one indexed read) and remembered while the condition lasts, so a
lasting condition costs no insert and no lookup; at most EMIT_LIMIT events are emitted per run, the
rest at the next runs, so an outage's burst never holds the loop for long.
What the steps remember is per process and only saves work: a new process
starts by reading everything once.

Thresholds: the setting (CRONIQ_SLOW_FACTOR, CRONIQ_MISSED_GRACE,
CRONIQ_UNSERVED_GRACE) and every distinct `slow_factor` / `grace` of an
enabled rule routing the event. Each threshold crossed is an event of its
own carrying it in `data` ("factor" / "grace"); `threshold_matches` says
which rule an event is meant for (a rule without its own threshold: the
setting's).

job.missed, decided here: an execution of the schedule (trigger schedule or
catch_up, first attempt) is missed when its instant plus the grace passed
before it started. Two ways are seen:
- still pending past the grace: the reason names the job's labels that no
  online runner carries, or says the runners carrying them are busy (with
  the queue's depth), or that they have room and did not claim it;
- started (running, or finished within LATE_LOOKBACK) more than the grace
  after its instant. When it was *created* more than the grace after its
  instant, the loop was not running then (it came back and caught up): the
  reason says "the scheduler was not running at the instant". The misfire
  path (`scheduler.firing.ticks.record_misfire`) stays as it is: instants the
  misfire policy drops (skip, or all but the last under run_once) create no
  execution and are not reported as job.missed (the audit's job.misfire has
  them, and the stall itself is scheduler.stalled).
"""

import math
import operator
from collections.abc import Collection, Iterable
from datetime import datetime, timedelta
from functools import reduce
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import CharField, Count, Exists, F, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Cast, Concat

from core import db
from dispatch.coverage import carries, lacking
from notifications import detection
from notifications.detection import BATCH, emit_new, fitted, iso, next_check, number, thresholds
from notifications.models import Event
from runners.models import Runner
from scheduler.models import Execution, Job

# The successful runs a job's usual duration (p95) is taken over.
BASELINE_RUNS = 20
# Seconds before a run can be slow by its baseline: a job that usually
# takes a second is not worth a notification each time it takes four.
BASELINE_FLOOR = 30.0
# A job's p95, and the jobs' label sets, are read again after this long
# (they change slowly).
BASELINE_TTL = CACHE_TTL = timedelta(minutes=1)
# Started executions this recent are checked for a late start: several runs
# of the step, so one delayed run of the loop loses none.
LATE_LOOKBACK = timedelta(minutes=2)
# A missed execution's reason counts the queue up to this.
QUEUE_COUNTED = 10000
# Jobs and online runners named in a labels.unserved event.
LISTED = 10
SCHEDULED = (Execution.SCHEDULE, Execution.CATCH_UP)

# Per process: {job id: (computed at, p95 seconds or None)}; {grace: (cutoff,
# highest execution id) of the last complete job.missed scan}. The keys known
# recorded are `detection`'s.
_baselines = {}
_missed_scans = {}
# {"sets": (read at, {label set: [its spellings]}), label set: [job ids]}.
_label_sets = {}
# The last complete scan's windows, widened by this much: an execution
# committed late (ids and instants are taken before the commit) is not lost.
SCAN_SLACK = timedelta(minutes=1)
ID_SLACK = 1000


def detect_slow(now: datetime) -> int:
    """job.slow for each running execution past its job's max_duration or,
    without one, past each factor x the job's p95 duration (and past
    BASELINE_FLOOR). Returns how many events were emitted."""
    factors = thresholds("job.slow", "slow_factor", settings.CRONIQ_SLOW_FACTOR)
    forget_baselines(now)
    running = list(
        Execution.objects.filter(
            state=Execution.RUNNING, claimed_at__isnull=False, claimed_at__lt=now
        ).values_list("pk", "job_id", "claimed_at", "job__max_duration")
    )
    load_baselines({job_id for _, job_id, _, max_duration in running if max_duration is None}, now)
    found = {}  # key -> (execution id, data)
    for pk, job_id, claimed_at, max_duration in running:
        elapsed = (now - claimed_at).total_seconds()
        for factor, data in slowness(job_id, elapsed, max_duration, factors):
            found[f"job.slow:{pk}:{number(factor) if factor else 'max'}"] = (pk, data)
    emitted, _ = emit_new("job.slow", found, now)
    return emitted


def slowness(
    job_id: int, elapsed: float, max_duration: int | None, factors: list[float]
) -> list[tuple[float | None, dict[str, Any]]]:
    """[(factor or None, data)] for each threshold the run is past."""
    data = {"elapsed": round(elapsed, 3), "max_duration": max_duration, "p95": None}
    if max_duration is not None:
        return [(None, {**data, "factor": None})] if elapsed > max_duration else []
    p95 = _baselines[job_id][1]
    if p95 is None:
        return []
    return [
        (factor, {**data, "p95": p95, "factor": factor})
        for factor in factors
        if elapsed > max(factor * p95, BASELINE_FLOOR)
    ]


def baseline(job_id: int, now: datetime) -> float | None:
    """The job's p95 duration (seconds) over its last successful runs, or
    None with fewer than CRONIQ_SLOW_MIN_HISTORY of them. Cached a minute."""
    load_baselines([job_id], now)
    return _baselines[job_id][1]


def load_baselines(job_ids: Iterable[int], now: datetime) -> None:
    """Read the p95 of the jobs not cached: one query on PostgreSQL."""
    missing = [job_id for job_id in job_ids if job_id not in _baselines]
    wanted = max(BASELINE_RUNS, settings.CRONIQ_SLOW_MIN_HISTORY)
    durations = {job_id: [] for job_id in missing}
    for start in range(0, len(missing), BATCH):
        for job_id, duration in last_successes(missing[start : start + BATCH], wanted):
            durations[job_id].append(duration)
    for job_id, runs in durations.items():
        enough = len(runs) >= settings.CRONIQ_SLOW_MIN_HISTORY
        _baselines[job_id] = (now, percentile_95(runs) if enough else None)


def last_successes(job_ids: list[int], count: int) -> list[tuple[int, float]]:
    """[(job id, seconds)] of the last `count` successful runs of each job,
    newest first, each read through the exec_job_history index."""
    if db.on_postgres():
        # One query for all the jobs: LIMIT per job, which the ORM cannot say.
        table = Execution._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT job.id, EXTRACT(EPOCH FROM run.finished_at - run.claimed_at)"
                " FROM unnest(%s::bigint[]) AS job(id) CROSS JOIN LATERAL ("
                f"  SELECT e.claimed_at, e.finished_at FROM {table} e"
                "   WHERE e.job_id = job.id AND e.state = %s"
                "   AND e.claimed_at IS NOT NULL AND e.finished_at IS NOT NULL"
                "   ORDER BY e.scheduled_for DESC LIMIT %s"
                " ) AS run",
                [list(job_ids), Execution.SUCCEEDED, count],
            )
            return [(job_id, float(seconds)) for job_id, seconds in cursor.fetchall()]
    runs = []
    for job_id in job_ids:
        last = (
            Execution.objects.filter(
                job_id=job_id,
                state=Execution.SUCCEEDED,
                claimed_at__isnull=False,
                finished_at__isnull=False,
            )
            .order_by("-scheduled_for")
            .values_list("claimed_at", "finished_at")[:count]
        )
        runs.extend((job_id, (finished - claimed).total_seconds()) for claimed, finished in last)
    return runs


def percentile_95(values: list[float]) -> float:
    """The nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def forget_baselines(now: datetime) -> None:
    """Drop the p95s read more than BASELINE_TTL before `now` (or after it:
    the clock went back)."""
    for job_id, (at, _) in list(_baselines.items()):
        if not (at <= now < at + BASELINE_TTL):
            del _baselines[job_id]


def forget() -> None:
    """Drop what this process remembers (tests: rolled-back ids come back)."""
    _baselines.clear()
    detection.forget()
    _missed_scans.clear()
    _label_sets.clear()


def detect_missed(now: datetime) -> int:
    """job.missed for each scheduled instant whose grace passed before its
    execution started (module docstring). Returns how many were emitted."""
    graces = thresholds("job.missed", "grace", settings.CRONIQ_MISSED_GRACE)
    pool = RunnerPool(now)
    found = {}
    scans = {}
    for grace in graces:
        late = timedelta(seconds=grace)
        executions, scans[grace] = missed_executions(now, grace)
        for execution in executions:
            if execution.state == Execution.PENDING:
                reason = pool.why_waiting(execution, late)
            else:
                reason = why_started_late(execution, late)
            found[missed_key(execution.pk, grace)] = (
                execution.pk,
                {
                    "scheduled_for": execution.scheduled_for.isoformat(),
                    "grace": grace,
                    "reason": reason,
                    "started_at": iso(execution.claimed_at),
                },
            )
    emitted, complete = emit_new("job.missed", found, now)
    if complete:
        # Everything found is recorded: the next run may skip it.
        _missed_scans.update((grace, scan) for grace, scan in scans.items() if scan)
    return emitted


def missed_executions(now: datetime, grace: float) -> tuple[list[Execution], Any]:
    """Executions of the schedule that missed `grace` and are not yet
    reported for it: pending (`pending_past_grace`) or started late (running,
    or finished within LATE_LOOKBACK); and the pending scan to remember."""
    late = timedelta(seconds=grace)
    scheduled = Execution.objects.filter(trigger__in=SCHEDULED, attempt=1).exclude(
        Exists(Event.objects.filter(key=missed_key_sql(grace)))
    )
    # Late against when it was due to start: a run-on-all job's `stagger`
    # starts its later runners after the instant on purpose.
    started_late = Q(claimed_at__gt=F("run_after") + late)
    running = scheduled.filter(started_late, state=Execution.RUNNING)
    finished = scheduled.filter(started_late, finished_at__gte=now - LATE_LOOKBACK)
    found, scan = pending_past_grace(scheduled, now, grace)
    for queryset in (running, finished):
        found.extend(queryset.select_related("job")[:BATCH])
    return found, scan


def pending_past_grace(
    scheduled: QuerySet, now: datetime, grace: float
) -> tuple[list[Execution], Any]:
    """The unreported pending executions whose run_after + `grace` passed,
    and the scan to remember once they are recorded (None: not all read).

    After one complete scan of them all, a run looks only at what may have
    joined since: executions whose grace ran out since the last run (by
    run_after, the exec_pending_order index) and executions created since
    (by id: a catch-up is created with an old run_after). So an outage's
    backlog, reported once, is not read again at every run.
    """
    cutoff = now - timedelta(seconds=grace)
    newest = Execution.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    pending = scheduled.filter(
        state=Execution.PENDING, run_after__lt=cutoff, cancel_requested_at__isnull=True
    ).select_related("job")
    last = _missed_scans.get(grace)
    by_instant = ("run_after", "scheduled_for", "id")
    if last is None or last[0] > cutoff:
        scans = [pending.order_by(*by_instant)]
    else:
        since, seen = last
        scans = [
            pending.filter(run_after__gte=since - SCAN_SLACK).order_by(*by_instant),
            pending.filter(pk__gt=seen - ID_SLACK).order_by("pk"),
        ]
    found = {}
    complete = True
    for scan in scans:
        batch = list(scan[:BATCH])
        complete = complete and len(batch) < BATCH
        found.update((execution.pk, execution) for execution in batch)
    return list(found.values()), (cutoff, newest) if complete else None


def missed_key_sql(grace: float) -> Concat:
    """`missed_key` of the outer execution, in SQL (the Event.key index)."""
    return Concat(
        Value("job.missed:"),
        Cast(OuterRef("pk"), CharField()),
        Value(f":{number(grace)}"),
        output_field=CharField(),
    )


def why_started_late(execution: Execution, late: timedelta) -> str:
    if execution.created_at - execution.scheduled_for > late:
        return "the scheduler was not running at the instant"
    waited = (execution.claimed_at - execution.run_after).total_seconds()
    return f"it waited {waited:.0f}s in the queue before a runner took it"


def missed_key(pk: int, grace: float) -> str:
    return f"job.missed:{pk}:{number(grace)}"


class RunnerPool:
    """The runners that can take work now (online, not drained), read once
    per step, and why an execution is still waiting for one of them."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.runners = list(
            Runner.objects.filter(state=Runner.ONLINE, drained=False).values_list(
                "pk", "name", "labels", "capacity", "features"
            )
        )
        self.reasons = {}  # label set -> reason
        self.ready = None

    def carriers(self, labels: Collection[str]) -> list[tuple[Any, ...]]:
        """The online runners whose labels include all of `labels`: the
        matching `dispatch.claims.claimable` does."""
        return [r for r in self.runners if carries(r[2], labels)]

    def listed(self) -> list[dict[str, Any]]:
        return [
            {"name": name, "labels": list(labels or ())} for _, name, labels, *_ in self.runners
        ]

    def why_waiting(self, execution: Execution, late: timedelta) -> str:
        if execution.created_at - execution.scheduled_for > late:
            return "the scheduler was not running at the instant"
        labels = frozenset(execution.job.labels or ())
        features = execution.job.features
        if (labels, features) not in self.reasons:
            self.reasons[labels, features] = self.reason(labels, features)
        return self.reasons[labels, features]

    def reason(self, labels: Collection[str], features: Collection[str] = ()) -> str:
        carriers = self.carriers(labels)
        if carriers and features:
            # Only runners whose agent announced the features take the job
            # (dispatch.claims.understood): older agents, and for run_as those
            # whose --allow-run-as names no user, carry its labels in vain.
            fitting = [r for r in carriers if set(features) <= set(r[4] or ())]
            if not fitting:
                missing = set().union(*(set(features) - set(r[4] or ()) for r in carriers))
                falls_short, remedy = lacking(missing)
                return (
                    f"the online runners carrying its labels run agents that {falls_short} "
                    f"{', '.join(sorted(missing))}: {remedy}"
                )
            carriers = fitting
        if not carriers:
            if not labels:
                return "no runner is online"
            return f"no online runner carries the labels {', '.join(sorted(labels))}"
        busy = Execution.objects.filter(
            state=Execution.RUNNING, runner_id__in=[r[0] for r in carriers]
        ).count()
        capacity = sum(r[3] for r in carriers)
        if busy >= capacity:
            return (
                f"the runners carrying its labels are busy ({busy} running on "
                f"{len(carriers)} runners, {self.queued()} executions queued)"
            )
        return (
            f"{len(carriers)} online runners carry its labels and have room, "
            "but none has claimed it"
        )

    def queued(self) -> int | None:
        """Ready executions waiting, counted up to QUEUE_COUNTED ("10000+")."""
        if self.ready is None:
            ready = Execution.objects.filter(state=Execution.PENDING, run_after__lte=self.now)
            count = ready[: QUEUE_COUNTED + 1].count()
            self.ready = f"{QUEUE_COUNTED}+" if count > QUEUE_COUNTED else str(count)
        return self.ready


def detect_unserved(now: datetime) -> int:
    """labels.unserved for each label set whose pending work, older than a
    grace, no online runner carries: one event per episode, the episode
    starting at the oldest such execution's run_after. Returns how many were
    emitted.

    Only the label sets no online runner carries are looked at (none, on a
    healthy install: no query of the executions at all), each by its oldest
    waiting execution (the exec_pending_order index, LIMIT 1); what the event
    says (counts, jobs) is read only when it is emitted.
    """
    graces = thresholds("labels.unserved", "grace", settings.CRONIQ_UNSERVED_GRACE)
    pool = RunnerPool(now)
    uncarried = [labels for labels in label_sets(now) if not pool.carriers(labels)]
    found = {}
    for labels in uncarried:
        jobs = jobs_carrying_exactly(labels, now)
        for grace in graces:
            waiting = Execution.objects.filter(
                state=Execution.PENDING,
                run_after__lt=now - timedelta(seconds=grace),
                cancel_requested_at__isnull=True,
                job_id__in=jobs,
            )
            since = waiting.order_by("run_after").values_list("run_after", flat=True).first()
            if since is None:
                continue
            names = sorted(labels)
            key = fitted(f"labels.unserved:{','.join(names)}:{since.isoformat()}:{number(grace)}")
            found[key] = (None, unserved_facts(waiting, names, since, grace, pool))
    emitted, _ = emit_new("labels.unserved", found, now)
    return emitted


def unserved_facts(
    waiting: QuerySet, labels: list[str], since: datetime, grace: float, pool: RunnerPool
) -> dict[str, Any]:
    """The event's data, read when it is emitted."""

    def facts():
        per_job = waiting.values("job__name").annotate(n=Count("id")).order_by("job__name")
        per_job = list(per_job.values_list("job__name", "n"))
        return {
            "labels": labels,
            "pending": sum(n for _, n in per_job),
            "since": since.isoformat(),
            "grace": grace,
            "jobs": [name for name, _ in per_job[:LISTED]],
            "online": pool.listed()[:LISTED],
        }

    return facts


def label_sets(now: datetime) -> list[Any]:
    """The distinct label sets of the jobs, read once a minute."""
    cached = _label_sets.get("sets")
    if cached is None or not (cached[0] <= now < cached[0] + CACHE_TTL):
        # order_by(): the jobs' default ordering would make DISTINCT compare
        # (labels, name), a row per job.
        values = Job.objects.order_by().values_list("labels", flat=True).distinct()
        _label_sets.clear()
        _label_sets["sets"] = cached = (now, {})
        for value in values:
            spellings = cached[1].setdefault(frozenset(value or ()), [])
            if (value or []) not in spellings:
                spellings.append(value or [])
    return list(cached[1])


def jobs_carrying_exactly(labels: Any, now: datetime) -> list[int]:
    """Ids of the jobs whose label set is `labels`, read once a minute."""
    if labels not in _label_sets:
        spellings = _label_sets["sets"][1][labels]  # ["a","b"] and ["b","a"]
        ids = Job.objects.filter(
            reduce(operator.or_, (Q(labels=spelling) for spelling in spellings))
        ).values_list("pk", flat=True)
        _label_sets[labels] = list(ids)
    return _label_sets[labels]


next_missed_check = next_check("job.missed", "CRONIQ_MISSED_GRACE")
next_unserved_check = next_check("labels.unserved", "CRONIQ_UNSERVED_GRACE")
