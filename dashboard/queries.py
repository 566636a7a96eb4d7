"""The dashboard's reads. Each function issues a fixed, small number of queries
whatever the size of the tables, so pages stay fast with 2,000 jobs and a
million executions: nothing here counts or loads a whole history.
"""

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from django.core.cache import cache
from django.db import connection
from django.db.models import (
    Aggregate,
    BooleanField,
    Case,
    Count,
    Exists,
    FloatField,
    Min,
    OuterRef,
    Q,
    Subquery,
    Value,
    When,
)
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.dateparse import parse_datetime

import audit
from audit.models import AuditEvent, Counter
from dashboard import charts, stats
from dispatch import coverage
from notifications.models import Delivery, Mute, Notification
from runners.models import Runner
from scheduler.models import Execution, Job, JobHealth, LogChunk
from scheduler.runs.outcomes import FAILING

STRIP_LENGTH = 20
JOBS_PER_PAGE = 50
HISTORY_PER_PAGE = 50
AUDIT_PER_PAGE = 50
CHART_POINTS = 1_000
STATS_WINDOWS = (7, 30)
# SQLite has no percentile_cont: its percentiles read at most this many of
# the job's newest runs (PostgreSQL computes them over the whole window).
# Each costs a row read: 2,000 keep a job run every minute under 20 ms.
STATS_SAMPLE = 2_000
HEATMAP_HOURS = 24
HEATMAP_JOBS = 10
LOG_CHUNKS_PER_POLL = 500
RUNNERS_LIMIT = 500
NOTIFICATIONS_PER_PAGE = 50
FAILING_JOBS_LIMIT = 100
MUTES_LIMIT = 100


class Page:
    """One page of a listing, found without COUNT(*): fetch one row more than
    the page holds to know whether a next page exists."""

    def __init__(self, rows, number, per_page):
        self.number = number
        self.has_next = len(rows) > per_page
        self.items = rows[:per_page]
        self.has_previous = number > 1
        self.next_number = number + 1
        self.previous_number = number - 1


def cheap_page(queryset, number, per_page):
    start = (number - 1) * per_page
    return Page(list(queryset[start : start + per_page + 1]), number, per_page)


def page_number(value):
    """A page number from a query string value; anything odd means page 1."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return 1
    return min(max(number, 1), 100_000)


# Overview


def live_counts():
    """Pending and running executions right now: both states have a partial
    index, so these counts never read the finished history."""
    return {
        Execution.PENDING: Execution.objects.filter(state=Execution.PENDING).count(),
        Execution.RUNNING: Execution.objects.filter(state=Execution.RUNNING).count(),
    }


def finished_totals():
    """Finished executions by state since the start, from the persisted
    `croniq_executions_total{state}` counters that /metrics exposes too
    (a GROUP BY over a million rows would read the whole table)."""
    totals = {}
    for counter in Counter.objects.filter(name="croniq_executions_total"):
        state = counter.label_dict().get("state", "")
        totals[state] = totals.get(state, 0) + counter.value
    return totals


def state_counts():
    """[(state, label, count)] in the model's order of states."""
    counts = {**finished_totals(), **live_counts()}
    return [(state, label, counts.get(state, 0)) for state, label in Execution.STATES]


def runner_counts():
    rows = Runner.objects.values("state").annotate(n=Count("id"))
    counts = {row["state"]: row["n"] for row in rows}
    counts["flapping"] = Runner.objects.filter(flapping=True).count()
    return counts


def scheduler_lag(now):
    """How far the trigger tick is behind: the age of the oldest due job
    (`job_due` index, as `croniq_scheduler_lag_seconds`), of the oldest
    execution waiting for a runner (`exec_pending_order` index), and of the loop's
    last finished tick."""
    oldest_due = Job.objects.filter(
        enabled=True, paused_at__isnull=True, next_run_at__lte=now
    ).aggregate(at=Min("next_run_at"))["at"]
    oldest_pending = Execution.objects.filter(
        state=Execution.PENDING, run_after__lte=now
    ).aggregate(at=Min("run_after"))["at"]
    last_tick = audit.last_tick()
    return {
        "trigger": now - oldest_due if oldest_due else timedelta(0),
        "dispatch": now - oldest_pending if oldest_pending else timedelta(0),
        "last_tick": last_tick,
        "tick_age": now - last_tick if last_tick else None,
    }


# The job list's filters (`?show=`), each a condition on the jobs.
JOB_FILTERS = {
    "failing": "failing (a failure streak)",
    "paused": "paused",
    "waiting": "waiting for a runner",
}


def job_filter(show, now):
    """The condition on a job of one of JOB_FILTERS."""
    if show == "failing":
        return Q(health__failure_streak__gt=0)
    if show == "paused":
        return Q(paused_at__isnull=False)
    # Through the `exec_job_pending` partial index, one probe per job.
    return Q(Exists(ready_pending(now).filter(job=OuterRef("pk"))))


def filtered_jobs(show, now):
    """The jobs one of JOB_FILTERS names; all jobs for anything else."""
    if show not in JOB_FILTERS:
        return Job.objects.all()
    return Job.objects.filter(job_filter(show, now))


def ready_pending(now):
    """Pending executions a runner could take now (not cancelled meanwhile)."""
    return Execution.objects.filter(
        state=Execution.PENDING, run_after__lte=now, cancel_requested_at__isnull=True
    )


def job_filter_counts(now):
    """{filter: how many jobs it shows}: a count over the jobs (a few
    thousand rows at most), never over the executions' history."""
    return Job.objects.aggregate(
        **{show: Count("pk", filter=job_filter(show, now)) for show in JOB_FILTERS}
    )


def jobs_page(number, search="", per_page=JOBS_PER_PAGE, show="", now=None):
    jobs = filtered_jobs(show, now).select_related("calendar").order_by("name")
    if search:
        jobs = jobs.filter(name__icontains=search)
    return cheap_page(jobs, number, per_page)


class PendingWork(NamedTuple):
    count: int
    since: datetime
    why: coverage.Waiting


def pending_work(jobs, now, runners=None):
    """{job id: PendingWork} for the `jobs` (model instances) that have
    pending executions, with why the oldest still waits; one query for the
    executions, one for the runners, one for their running work if asked."""
    if not jobs:
        return {}
    rows = list(
        Execution.objects.filter(
            state=Execution.PENDING, cancel_requested_at__isnull=True, job__in=[j.pk for j in jobs]
        )
        .values_list("job_id")
        .annotate(n=Count("id"), since=Min("run_after"))
        .order_by()
    )
    if not rows:
        return {}
    found = {}
    runners = runners or coverage.Coverage.read()
    labels = {job.pk: job.labels for job in jobs}
    for job_id, n, since in rows:
        found[job_id] = PendingWork(n, since, runners.why_waiting(labels[job_id], since, now))
    return found


class StripRun(NamedTuple):
    pk: int
    job_id: int
    state: str
    scheduled_for: datetime
    attempt: int


def recent_results(job_ids, per_job=STRIP_LENGTH):
    """{job_id: [StripRun, ...]} the newest `per_job` executions of each job,
    newest first, in one query.

    Each branch of the UNION ALL is an index range scan on (job, scheduled_for)
    that stops after `per_job` rows, so the cost is bounded by the jobs on the
    page, not by the size of their histories. (SQLite refuses LIMIT inside a
    compound SELECT's members, hence the wrapping sub-selects.) Plain tuples,
    not model instances: the overview draws up to a thousand of them.
    """
    if not job_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(*recent_results_sql(job_ids, per_job))
        rows = cursor.fetchall()
    results = defaultdict(list)
    for pk, job_id, state, scheduled_for, attempt in rows:
        results[job_id].append(StripRun(pk, job_id, state, as_utc(scheduled_for), attempt))
    for runs in results.values():
        runs.sort(key=lambda run: (run.scheduled_for, run.attempt), reverse=True)
    return dict(results)


def recent_results_sql(job_ids, per_job):
    table = connection.ops.quote_name(Execution._meta.db_table)
    branch = (
        f"SELECT * FROM (SELECT id, job_id, state, scheduled_for, attempt FROM {table}"
        " WHERE job_id = %s ORDER BY scheduled_for DESC, attempt DESC LIMIT %s) AS b{n}"
    )
    sql = " UNION ALL ".join(branch.format(n=n) for n in range(len(job_ids)))
    params = []
    for job_id in job_ids:
        params += [job_id, per_job]
    return sql, params


def as_utc(value):
    """A datetime column read through a raw cursor: SQLite hands back text."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if timezone.is_naive(value):
        value = value.replace(tzinfo=UTC)
    return value


# Job page


def job_history(job, number, state="", per_page=HISTORY_PER_PAGE):
    """A page of the job's runs, newest first, optionally in one state only
    (read newest-first through the job's history index)."""
    runs = Execution.objects.filter(job=job).select_related("runner")
    if state:
        runs = runs.filter(state=state)
    return cheap_page(runs.order_by("-scheduled_for", "-attempt"), number, per_page)


# Runs that are a verdict on the job: success rate and heat-map count these.
SETTLED = Execution.SETTLED_STATES


def states_sql(states):
    """`state IN ('a', 'b')` with literals (the model's own state names).

    The outcome indexes are partial on SETTLED: SQLite uses one only for a
    query that names that very list, and checks it row by row (ten times
    slower) unless it is spelled with literals rather than bound values.
    """
    known = dict(Execution.STATES)
    assert all(state in known for state in states), states
    table = connection.ops.quote_name(Execution._meta.db_table)
    return f"{table}.state IN ({', '.join(repr(str(state)) for state in states)})"


def settled_runs():
    return Execution.objects.filter(RawSQL(states_sql(SETTLED), [], output_field=BooleanField()))


# finished_at - claimed_at in seconds, by the database.
SECONDS_SQL = {
    "postgresql": "EXTRACT(EPOCH FROM finished_at - claimed_at)::float8",
    "sqlite": "(julianday(finished_at) - julianday(claimed_at)) * 86400.0",
}


def seconds_expression():
    return RawSQL(SECONDS_SQL[connection.vendor], [], output_field=FloatField())


# A datetime column as seconds since the epoch.
EPOCH_SQL = {
    "postgresql": "EXTRACT(EPOCH FROM {column})::float8",
    "sqlite": "(julianday({column}) - 2440587.5) * 86400.0",
}


def epoch_expression(column):
    sql = EPOCH_SQL[connection.vendor].format(column=connection.ops.quote_name(column))
    return RawSQL(sql, [], output_field=FloatField())


def with_duration(runs):
    """The finished runs among `runs` that have a duration (they ran)."""
    return runs.filter(
        state__in=Execution.FINAL_STATES, claimed_at__isnull=False, finished_at__isnull=False
    )


def has_duration(state, seconds):
    return state in Execution.FINAL_STATES and seconds is not None


def newest_runs(job):
    """The job's runs newest first, through its history index. Filtered by
    the job alone: a filter on state or finished_at would lead SQLite's
    planner to `exec_job_state_finished` and a sort of the whole history."""
    return (
        Execution.objects.filter(job=job)
        .annotate(seconds=seconds_expression())
        .order_by("-scheduled_for", "-attempt")
    )


def duration_runs(job, limit=CHART_POINTS):
    """[DurationRun] those of the newest `limit` runs that finished with a
    duration, oldest first. The database computes the durations and the
    start instants as epoch seconds: parsing a thousand datetimes on SQLite
    would cost more than the query. (SQLite's julianday() is exact to some
    20 µs; the chart needs milliseconds at most.)"""
    rows = (
        newest_runs(job)
        .annotate(started=epoch_expression("claimed_at"))
        .values_list("pk", "state", "started", "seconds")[:limit]
    )
    return [
        charts.DurationRun(
            pk, state, datetime.fromtimestamp(round(started, 3), UTC), seconds, state in FAILING
        )
        for pk, state, started, seconds in reversed(rows)
        if has_duration(state, seconds)
    ]


def cached_run_stats(job, now):
    """`run_stats(job, now)`, reused for the rest of `now`'s minute (as the
    heat-map): a busy job's 30 days are tens of thousands of durations."""
    key = f"croniq:run-stats:{job.pk}:{now:%Y-%m-%dT%H:%M}"
    return cache.get_or_set(key, lambda: run_stats(job, now), HEATMAP_CACHE_SECONDS)


def run_stats(job, now, windows=STATS_WINDOWS):
    """[WindowStats] of the job's runs finished in each of the last `windows`
    days, in two queries: the counts read the `exec_job_state_finished`
    index alone, the durations a bounded part of the job's history."""
    since = {days: now - timedelta(days=days) for days in windows}
    counts = scalar_counts(
        [(SETTLED, job.pk, start, now) for start in since.values()]
        + [((Execution.SUCCEEDED,), job.pk, start, now) for start in since.values()]
    )
    found = duration_percentiles(job, since, now)
    settled, succeeded = counts[: len(windows)], counts[len(windows) :]
    return [
        stats.WindowStats(days=days, settled=settled[i], succeeded=succeeded[i], **found[days])
        for i, days in enumerate(windows)
    ]


def scalar_counts(ranges):
    """[n] the settled executions in each (states, job id or None, start, end) of
    `ranges`, finished in [start, end), in one query of scalar subqueries.
    Each is an index range count that decodes no row: a GROUP BY over the
    same rows is ten times slower on SQLite at 50,000 rows. Plain SQL: the
    ORM takes longer to compile fifty querysets than SQLite to count."""
    table = connection.ops.quote_name(Execution._meta.db_table)
    adapt = connection.ops.adapt_datetimefield_value
    parts, params = [], []
    for states, job_id, start, end in ranges:
        where = [states_sql(SETTLED), states_sql(states)]
        if job_id is not None:
            where.insert(0, f"{table}.job_id = %s")
            params.append(job_id)
        where.append(f"{table}.finished_at >= %s AND {table}.finished_at < %s")
        parts.append(f"(SELECT COUNT(*) FROM {table} WHERE {' AND '.join(where)})")
        params += [adapt(start), adapt(end)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(parts), params)
        return list(cursor.fetchone())


class PercentileCont(Aggregate):
    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def duration_percentiles(job, since, now):
    """{days: {"p50": ..., "p95": ..., "p99": ..., "sampled": bool}}."""
    if connection.vendor == "postgresql":
        return postgres_percentiles(job, since, now)
    return sampled_percentiles(job, since, now)


def postgres_percentiles(job, since, now):
    names = {fraction: f"p{round(fraction * 100)}" for fraction in stats.PERCENTILES}
    runs = with_duration(Execution.objects.filter(job=job)).filter(
        finished_at__gte=min(since.values()), finished_at__lte=now
    )
    found = runs.aggregate(
        **{
            f"{name}_{days}": PercentileCont(
                seconds_expression(), fraction=fraction, filter=Q(finished_at__gte=start)
            )
            for days, start in since.items()
            for fraction, name in names.items()
        }
    )
    return {
        days: {name: found[f"{name}_{days}"] for name in names.values()} | {"sampled": False}
        for days in since
    }


def sampled_percentiles(job, since, now):
    """Percentiles in Python over the newest STATS_SAMPLE runs (SQLite has no
    percentile_cont): one bounded read, each row flagged with the windows its
    finish falls in. A window is sampled when its runs go on past the read."""
    flags = {
        f"in_{days}": Case(
            When(finished_at__gte=start, finished_at__lte=now, then=Value(1)), default=Value(0)
        )
        for days, start in since.items()
    }
    rows = list(
        newest_runs(job).annotate(**flags).values_list("state", "seconds", *flags)[:STATS_SAMPLE]
    )
    full = len(rows) == STATS_SAMPLE
    ran = [row for row in rows if has_duration(row[0], row[1])]
    found = {}
    for i, days in enumerate(since, start=2):
        p50, p95, p99 = stats.percentiles([row[1] for row in ran if row[i]])
        sampled = full and bool(rows[-1][i])
        found[days] = {"p50": p50, "p95": p95, "p99": p99, "sampled": sampled}
    return found


# Execution page


def why_waiting(execution, now):
    """Why a pending execution has not started (None for any other)."""
    if execution.state != Execution.PENDING:
        return None
    return coverage.Coverage.read().why_waiting(execution.job.labels, execution.run_after, now)


def log_chunks(execution, after=-1, limit=None):
    chunks = LogChunk.objects.filter(execution=execution, seq__gt=after).order_by("seq")
    if limit is not None:
        chunks = chunks[:limit]
    return list(chunks.values_list("seq", "data"))


def execution_attempts(execution):
    """All attempts for the same scheduled instant (retries), oldest first;
    a run on every runner: this runner's attempts."""
    return list(
        Execution.objects.filter(
            job_id=execution.job_id,
            scheduled_for=execution.scheduled_for,
            pinned_to=execution.pinned_to,
        ).order_by("attempt")
    )


# Runners page


def runners_with_work(now, state="", limit=RUNNERS_LIMIT):
    """Runners and what each is running, in two queries.

    All running executions are read through the small `exec_running_lease`
    partial index (there are at most as many as the runners' capacity);
    filtering them by a list of runner ids instead leads SQLite's planner
    into a full scan, most rows having no runner.
    """
    runners = Runner.objects.order_by("name")
    if state == "flapping":
        runners = runners.filter(flapping=True)
    elif state:
        runners = runners.filter(state=state)
    runners = list(runners[:limit])
    work = defaultdict(list)
    running = Execution.objects.filter(state=Execution.RUNNING).select_related("job")
    for execution in running.order_by("claimed_at"):
        work[execution.runner_id].append(execution)
    for runner in runners:
        runner.current_work = work.get(runner.pk, [])
        runner.liveness = coverage.liveness(runner.state, runner.last_seen_at, now)
    return runners


# Audit page


def audit_events(action="", actor="", target="", number=1, per_page=AUDIT_PER_PAGE):
    """Newest first, filtered; a page without COUNT(*).

    `action` is exact ("runner.takeover") or a prefix ending in a dot
    ("runner."). `actor` matches the actor name exactly, or "kind:name".
    `target` is "type:id" (the `audit_target` index, e.g.
    "runners.runner:7") or text found in the target's description.
    """
    events = AuditEvent.objects.all()
    if action:
        events = (
            events.filter(action__startswith=action)
            if action.endswith(".")
            else events.filter(action=action)
        )
    if actor:
        kind, sep, name = actor.partition(":")
        if sep and kind in dict(AuditEvent.ACTOR_KINDS):
            events = events.filter(actor_kind=kind, actor_name=name)
        else:
            events = events.filter(actor_name=actor)
    if target:
        target_type, sep, target_id = target.partition(":")
        if sep and "." in target_type and target_id:
            events = events.filter(target_type=target_type, target_id=target_id)
        else:
            events = events.filter(target_repr__icontains=target)
    return cheap_page(events.order_by("-at", "-id"), number, per_page)


# Alerts page


def notifications_page(number, state="", per_page=NOTIFICATIONS_PER_PAGE):
    """Newest notifications first (the `notification_created` index), each
    with the latency of its last delivery try, in one query."""
    last_try = Delivery.objects.filter(notification=OuterRef("pk")).order_by("-attempt")
    notifications = Notification.objects.select_related("channel", "job").annotate(
        last_latency=Subquery(last_try.values("latency")[:1])
    )
    if state:
        notifications = notifications.filter(state=state)
    return cheap_page(notifications.order_by("-created_at", "-id"), number, per_page)


def notification_counts(now, hours=24):
    """[(state, label, count)] of the notifications created in the last `hours`."""
    since = now - timedelta(hours=hours)
    rows = (
        Notification.objects.filter(created_at__gte=since)
        .values_list("state")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts = dict(rows)
    return [(state, label, counts.get(state, 0)) for state, label in Notification.STATES]


def active_mutes(now, limit=MUTES_LIMIT):
    """Mutes still in force, the one ending first on top."""
    mutes = Mute.objects.filter(until__gt=now).select_related("rule", "job")
    return list(mutes.order_by("until", "id")[:limit])


def failing_jobs(limit=FAILING_JOBS_LIMIT):
    """Jobs on a failure streak, longest streak first, then failing longest."""
    health = JobHealth.objects.filter(failure_streak__gt=0).select_related("job")
    return list(health.order_by("-failure_streak", "failing_since", "job__name")[:limit])


# Failure heat-map (overview)

# The hour bucket of finished_at, counted from the epoch second %s.
HOUR_BUCKET_SQL = {
    "postgresql": "FLOOR((EXTRACT(EPOCH FROM finished_at) - %s) / 3600)::integer",
    "sqlite": "(CAST(strftime('%%s', finished_at) AS INTEGER) - %s) / 3600",
}


# The heat-map (and a job's run statistics) are read at most once a minute
# per web process: their counts are most of the overview's database time on
# PostgreSQL (about 70 ms of 180 ms at 1,000,000 executions), and a count
# over hours or days moves little in a minute.
HEATMAP_CACHE_SECONDS = 60


def cached_failure_heatmap_rows(now):
    """`failure_heatmap_rows(now)`, reused for the rest of `now`'s minute."""
    key = f"croniq:heatmap:{now:%Y-%m-%dT%H:%M}"
    return cache.get_or_set(key, lambda: failure_heatmap_rows(now), HEATMAP_CACHE_SECONDS)


def failure_heatmap_rows(now, hours=HEATMAP_HOURS, jobs=HEATMAP_JOBS):
    """[(label, job name, {bucket: (failed, total)})] of the runs settled in
    the last `hours` clock hours (bucket 0 the oldest): all jobs together,
    then the `jobs` jobs with the most failures. Four queries on the
    `exec_state_finished` and `exec_job_state_finished` indexes."""
    starts = charts.hour_buckets(now, hours)
    rows = [("All jobs", "", hourly_counts(starts))]
    first, end = starts[0], starts[-1] + charts.HOUR
    worst = list(
        settled_runs()
        .filter(state__in=FAILING, finished_at__gte=first, finished_at__lt=end)
        .values_list("job_id")
        .annotate(n=Count("pk"))
        .order_by("-n", "job_id")[:jobs]
    )
    if not worst:
        return rows
    ids = [job_id for job_id, _ in worst]
    names = dict(Job.objects.filter(pk__in=ids).values_list("pk", "name"))
    per_job = job_hourly_counts(ids, first, end)
    rows += [(names[pk], names[pk], per_job.get(pk, {})) for pk in ids if pk in names]
    return rows


def hourly_counts(starts):
    """{bucket: (failed, total)} of all jobs, for the hours that had runs."""
    hours = [(start, start + charts.HOUR) for start in starts]
    counts = scalar_counts(
        [(FAILING, None, start, end) for start, end in hours]
        + [(SETTLED, None, start, end) for start, end in hours]
    )
    failed, total = counts[: len(hours)], counts[len(hours) :]
    return {i: (failed[i], total[i]) for i in range(len(hours)) if total[i]}


def job_hourly_counts(job_ids, first, end):
    """{job_id: {bucket: (failed, total)}} of a few jobs."""
    bucket = RawSQL(HOUR_BUCKET_SQL[connection.vendor], [int(first.timestamp())])
    rows = (
        settled_runs()
        .filter(job_id__in=job_ids, finished_at__gte=first, finished_at__lt=end)
        .annotate(bucket=bucket)
        .values("job_id", "bucket")
        .annotate(failed=Count("pk", filter=Q(state__in=FAILING)), total=Count("pk"))
        .order_by()
    )
    counts = defaultdict(dict)
    for row in rows:
        counts[row["job_id"]][row["bucket"]] = (row["failed"], row["total"])
    return dict(counts)
