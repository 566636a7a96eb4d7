"""Events that no single state change causes, found by looking: a run going
on too long (job.slow), an instant that passed its grace without starting
(job.missed), pending work that no online runner can take (labels.unserved).

Each detector is a loop step (`NotificationsConfig.loop_steps`): it takes
`now`, reads what is live through the scheduler's indexes (running
executions, pending ones by run_after, recently finished ones by
finished_at), and returns how many events it emitted. Every event carries a
`key` naming what it reports and the threshold it crossed, so the Event.key
unique constraint reports it once however often the step runs and however
many loops run it; keys already recorded are looked up first, so a
condition that lasts costs one indexed read per step, not a failed insert.

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
  path (`scheduler.ticks.record_misfire`) stays as it is: instants the
  misfire policy drops (skip, or all but the last under run_once) create no
  execution and are not reported as job.missed (the audit's job.misfire has
  them, and the stall itself is scheduler.stalled).
"""

import hashlib
import math
from datetime import timedelta

from django.conf import settings
from django.db.models import CharField, Count, Exists, F, Min, OuterRef, Q, Value
from django.db.models.functions import Cast, Concat

from notifications.models import Event, Rule
from runners.models import Runner
from scheduler import events
from scheduler.models import Execution, Job

# The successful runs a job's usual duration (p95) is taken over.
BASELINE_RUNS = 20
# A job's p95 is read again after this long (it moves slowly).
BASELINE_TTL = timedelta(minutes=1)
# Executions examined per query: the step's work per run stays bounded.
BATCH = 500
# Started executions this recent are checked for a late start: several runs
# of the step, so one delayed run of the loop loses none.
LATE_LOOKBACK = timedelta(minutes=2)
# Jobs and online runners named in a labels.unserved event.
LISTED = 10
SCHEDULED = (Execution.SCHEDULE, Execution.CATCH_UP)
KEY_LENGTH = 200  # Event.key's max_length

# {job id: (computed at, p95 seconds or None)}, per process.
_baselines = {}


def detect_slow(now):
    """job.slow for each running execution past its job's max_duration or,
    without one, past each factor x the job's p95 duration. Returns how many
    events were emitted."""
    factors = thresholds("job.slow", "slow_factor", settings.CRONIQ_SLOW_FACTOR)
    forget_baselines(now)
    found = {}  # key -> (execution id, data)
    running = Execution.objects.filter(
        state=Execution.RUNNING, claimed_at__isnull=False, claimed_at__lt=now
    ).values_list("pk", "job_id", "claimed_at", "job__max_duration")
    for pk, job_id, claimed_at, max_duration in running.iterator(chunk_size=BATCH):
        elapsed = (now - claimed_at).total_seconds()
        for factor, data in slowness(job_id, elapsed, max_duration, factors, now):
            found[f"job.slow:{pk}:{number(factor) if factor else 'max'}"] = (pk, data)
    return emit_new("job.slow", found, now)


def slowness(job_id, elapsed, max_duration, factors, now):
    """[(factor or None, data)] for each threshold the run is past."""
    data = {"elapsed": round(elapsed, 3), "max_duration": max_duration, "p95": None}
    if max_duration is not None:
        return [(None, {**data, "factor": None})] if elapsed > max_duration else []
    p95 = baseline(job_id, now)
    if p95 is None:
        return []
    return [
        (factor, {**data, "p95": p95, "factor": factor})
        for factor in factors
        if elapsed > factor * p95
    ]


def baseline(job_id, now):
    """The job's p95 duration (seconds) over its last successful runs, or
    None with fewer than CRONIQ_SLOW_MIN_HISTORY of them. Cached a minute."""
    cached = _baselines.get(job_id)
    if cached is not None:
        return cached[1]
    wanted = max(BASELINE_RUNS, settings.CRONIQ_SLOW_MIN_HISTORY)
    runs = (
        Execution.objects.filter(
            job_id=job_id,
            state=Execution.SUCCEEDED,
            claimed_at__isnull=False,
            finished_at__isnull=False,
        )
        .order_by("-scheduled_for")  # the exec_job_history index
        .values_list("claimed_at", "finished_at")[:wanted]
    )
    durations = [(finished - claimed).total_seconds() for claimed, finished in runs]
    p95 = percentile_95(durations) if len(durations) >= settings.CRONIQ_SLOW_MIN_HISTORY else None
    _baselines[job_id] = (now, p95)
    return p95


def percentile_95(values):
    """The nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def forget_baselines(now=None):
    """Drop the p95s read more than BASELINE_TTL before `now` (all of them
    without `now`, or when the clock went back)."""
    for job_id, (at, _) in list(_baselines.items()):
        if now is None or not (at <= now < at + BASELINE_TTL):
            del _baselines[job_id]


def detect_missed(now):
    """job.missed for each scheduled instant whose grace passed before its
    execution started (module docstring). Returns how many were emitted."""
    graces = thresholds("job.missed", "grace", settings.CRONIQ_MISSED_GRACE)
    pool = RunnerPool(now)
    found = {}
    for grace in graces:
        late = timedelta(seconds=grace)
        for execution in missed_executions(now, grace):
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
    return emit_new("job.missed", found, now)


def missed_executions(now, grace):
    """Executions of the schedule that missed `grace` and are not yet
    reported for it: pending (the exec_pending_order index) or started late
    (running, or finished within LATE_LOOKBACK)."""
    late = timedelta(seconds=grace)
    reported = Exists(
        Event.objects.filter(
            key=Concat(
                Value("job.missed:"),
                Cast(OuterRef("pk"), CharField()),
                Value(f":{number(grace)}"),
                output_field=CharField(),
            )
        )
    )
    scheduled = Execution.objects.filter(trigger__in=SCHEDULED, attempt=1).exclude(reported)
    pending = scheduled.filter(
        state=Execution.PENDING, run_after__lt=now - late, cancel_requested_at__isnull=True
    ).order_by("run_after", "scheduled_for", "id")
    started_late = Q(claimed_at__gt=F("scheduled_for") + late)
    running = scheduled.filter(started_late, state=Execution.RUNNING)
    finished = scheduled.filter(started_late, finished_at__gte=now - LATE_LOOKBACK)
    found = []
    for queryset in (pending, running, finished):
        found.extend(queryset.select_related("job")[:BATCH])
    return found


def why_started_late(execution, late):
    if execution.created_at - execution.scheduled_for > late:
        return "the scheduler was not running at the instant"
    waited = (execution.claimed_at - execution.run_after).total_seconds()
    return f"it waited {waited:.0f}s in the queue before a runner took it"


def missed_key(pk, grace):
    return f"job.missed:{pk}:{number(grace)}"


class RunnerPool:
    """The runners that can take work now (online, not drained), read once
    per step, and why an execution is still waiting for one of them."""

    def __init__(self, now):
        self.now = now
        self.runners = list(
            Runner.objects.filter(state=Runner.ONLINE, drained=False).values_list(
                "pk", "name", "labels", "capacity"
            )
        )
        self.reasons = {}  # label set -> reason
        self.ready = None

    def carriers(self, labels):
        """The online runners whose labels include all of `labels`: the
        matching `runners.claims.claimable` does."""
        wanted = set(labels)
        return [r for r in self.runners if wanted <= set(r[2] or ())]

    def listed(self):
        return [{"name": name, "labels": list(labels or ())} for _, name, labels, _ in self.runners]

    def why_waiting(self, execution, late):
        if execution.created_at - execution.scheduled_for > late:
            return "the scheduler was not running at the instant"
        labels = frozenset(execution.job.labels or ())
        if labels not in self.reasons:
            self.reasons[labels] = self.reason(labels)
        return self.reasons[labels]

    def reason(self, labels):
        carriers = self.carriers(labels)
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

    def queued(self):
        if self.ready is None:
            self.ready = Execution.objects.filter(
                state=Execution.PENDING, run_after__lte=self.now
            ).count()
        return self.ready


def detect_unserved(now):
    """labels.unserved for each label set whose pending work, older than a
    grace, no online runner carries: one event per episode, the episode
    starting at the oldest such execution's run_after. Returns how many were
    emitted."""
    graces = thresholds("labels.unserved", "grace", settings.CRONIQ_UNSERVED_GRACE)
    pool = RunnerPool(now)
    found = {}
    for grace in graces:
        for labels, (pending, since, jobs) in waiting_by_labels(now, grace).items():
            if pool.carriers(labels):
                continue
            names = sorted(labels)
            key = fitted(f"labels.unserved:{','.join(names)}:{since.isoformat()}:{number(grace)}")
            found[key] = (
                None,
                {
                    "labels": names,
                    "pending": pending,
                    "since": since.isoformat(),
                    "grace": grace,
                    "jobs": sorted(jobs)[:LISTED],
                    "online": pool.listed()[:LISTED],
                },
            )
    return emit_new("labels.unserved", found, now)


def waiting_by_labels(now, grace):
    """{label set: (pending executions, oldest run_after, job names)} of the
    executions pending for longer than `grace`; grouped by job in SQL (the
    exec_pending_order index), then by the jobs' label sets."""
    per_job = (
        Execution.objects.filter(
            state=Execution.PENDING,
            run_after__lt=now - timedelta(seconds=grace),
            cancel_requested_at__isnull=True,
        )
        .values("job_id")
        .annotate(pending=Count("id"), since=Min("run_after"))
        .values_list("job_id", "pending", "since")
    )
    counts = {job_id: (pending, since) for job_id, pending, since in per_job}
    groups = {}
    jobs = Job.objects.filter(pk__in=list(counts)).values_list("pk", "name", "labels")
    for pk, name, labels in jobs.iterator(chunk_size=BATCH):
        pending, since = counts[pk]
        total, oldest, names = groups.get(frozenset(labels or ()), (0, since, []))
        groups[frozenset(labels or ())] = (total + pending, min(oldest, since), [*names, name])
    return groups


def thresholds(event, field, default):
    """The setting's value and each distinct `field` of the enabled rules
    routing `event`, smallest first."""
    values = {float(default)}
    rules = Rule.objects.filter(enabled=True, **{f"{field}__isnull": False})
    for routed, value in rules.values_list("events", field):
        if event in (routed or ()) and value > 0:
            values.add(float(value))
    return sorted(values)


def threshold_matches(rule, name, data):
    """Whether an event a detector emitted is meant for `rule`: each carries
    the threshold it crossed, and a rule hears the events of its own
    threshold (the setting's when it has none). Other events: always."""
    if name == "job.slow":
        if data.get("factor") is None:
            return True  # past the job's own max_duration
        wanted = rule.slow_factor or settings.CRONIQ_SLOW_FACTOR
        return math.isclose(data["factor"], wanted)
    defaults = {
        "job.missed": settings.CRONIQ_MISSED_GRACE,
        "labels.unserved": settings.CRONIQ_UNSERVED_GRACE,
        "scheduler.stalled": settings.CRONIQ_STALL_GRACE,
    }
    if name not in defaults or data.get("grace") is None:
        return True
    return math.isclose(data["grace"], rule.grace or defaults[name])


def emit_new(name, found, now):
    """Emit `found` ({key: (execution id or None, data)}) but the keys
    already recorded; returns how many were emitted."""
    keys = list(found)
    recorded = set()
    for start in range(0, len(keys), BATCH):
        chunk = keys[start : start + BATCH]
        recorded.update(Event.objects.filter(key__in=chunk).values_list("key", flat=True))
    new = {key: found[key] for key in keys if key not in recorded}
    executions = Execution.objects.select_related("job", "runner").in_bulk(
        [pk for pk, _ in new.values() if pk is not None]
    )
    for key, (pk, data) in new.items():
        execution = executions.get(pk)
        events.emit(
            name,
            at=now,
            job=execution.job if execution else None,
            execution=execution,
            runner=execution.runner if execution else None,
            data=data,
            key=key,
        )
    return len(new)


def number(value):
    """3.0 -> "3", 2.5 -> "2.5": thresholds as keys write them."""
    return f"{value:g}"


def iso(instant):
    return instant.isoformat() if instant is not None else None


def fitted(key):
    """A key within Event.key's length: long label sets are hashed."""
    if len(key) <= KEY_LENGTH:
        return key
    return key[: KEY_LENGTH - 41] + "~" + hashlib.sha1(key.encode()).hexdigest()
