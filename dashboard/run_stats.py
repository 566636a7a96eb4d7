"""What a job's runs add up to, for the dashboard: durations for its chart,
success rates and percentiles over the last days, and the failure heat-map's
hourly counts. Counted through the outcome indexes (partial on the settled
states), each in a fixed, small number of queries however long the history.
"""

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import (
    Aggregate,
    BooleanField,
    Case,
    Count,
    FloatField,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.expressions import RawSQL

from core import db
from dashboard import charts, stats
from scheduler.models import Execution, Job
from scheduler.runs.outcomes import FAILING

CHART_POINTS = 1_000
STATS_WINDOWS = (7, 30)
# SQLite has no percentile_cont: its percentiles read at most this many of
# the job's newest runs (PostgreSQL computes them over the whole window).
# Each costs a row read: 2,000 keep a job run every minute under 20 ms.
STATS_SAMPLE = 2_000
HEATMAP_HOURS = 24
HEATMAP_JOBS = 10


# Runs that are a verdict on the job: success rate and heat-map count these.
SETTLED = Execution.SETTLED_STATES


def states_sql(states: Iterable[str]) -> str:
    """`state IN ('a', 'b')` with literals (the model's own state names).

    The outcome indexes are partial on SETTLED: SQLite uses one only for a
    query that names that very list, and checks it row by row (ten times
    slower) unless it is spelled with literals rather than bound values.
    """
    known = dict(Execution.STATES)
    assert all(state in known for state in states), states
    table = connection.ops.quote_name(Execution._meta.db_table)
    return f"{table}.state IN ({', '.join(repr(str(state)) for state in states)})"


def settled_runs() -> QuerySet:
    return Execution.objects.filter(RawSQL(states_sql(SETTLED), [], output_field=BooleanField()))


# finished_at - claimed_at in seconds, by the database.
SECONDS_SQL = {
    "postgresql": "EXTRACT(EPOCH FROM finished_at - claimed_at)::float8",
    "sqlite": "(julianday(finished_at) - julianday(claimed_at)) * 86400.0",
}


def seconds_expression() -> RawSQL:
    return RawSQL(SECONDS_SQL[db.vendor()], [], output_field=FloatField())


# A datetime column as seconds since the epoch.
EPOCH_SQL = {
    "postgresql": "EXTRACT(EPOCH FROM {column})::float8",
    "sqlite": "(julianday({column}) - 2440587.5) * 86400.0",
}


def epoch_expression(column: str) -> RawSQL:
    sql = EPOCH_SQL[db.vendor()].format(column=connection.ops.quote_name(column))
    return RawSQL(sql, [], output_field=FloatField())


def with_duration(runs: QuerySet) -> QuerySet:
    """The finished runs among `runs` that have a duration (they ran)."""
    return runs.filter(
        state__in=Execution.FINAL_STATES, claimed_at__isnull=False, finished_at__isnull=False
    )


def has_duration(state: str, seconds: float | None) -> bool:
    return state in Execution.FINAL_STATES and seconds is not None


def newest_runs(job: Job) -> QuerySet:
    """The job's runs newest first, through its history index. Filtered by
    the job alone: a filter on state or finished_at would lead SQLite's
    planner to `exec_job_state_finished` and a sort of the whole history."""
    return (
        Execution.objects.filter(job=job)
        .annotate(seconds=seconds_expression())
        .order_by("-scheduled_for", "-attempt")
    )


def duration_runs(job: Job, limit: int = CHART_POINTS) -> list[charts.DurationRun]:
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


def cached_run_stats(job: Job, now: datetime) -> list[stats.WindowStats]:
    """`run_stats(job, now)`, reused for the rest of `now`'s minute (as the
    heat-map): a busy job's 30 days are tens of thousands of durations."""
    key = f"croniq:run-stats:{job.pk}:{now:%Y-%m-%dT%H:%M}"
    return cache.get_or_set(key, lambda: run_stats(job, now), HEATMAP_CACHE_SECONDS)


def run_stats(
    job: Job, now: datetime, windows: Sequence[int] = STATS_WINDOWS
) -> list[stats.WindowStats]:
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


def scalar_counts(
    ranges: Iterable[tuple[Iterable[str], int | None, datetime, datetime]],
) -> list[int]:
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


def duration_percentiles(
    job: Job, since: dict[int, datetime], now: datetime
) -> dict[int, dict[str, Any]]:
    """{days: {"p50": ..., "p95": ..., "p99": ..., "sampled": bool}}."""
    # SQLite has no percentile_cont: it samples the newest runs instead.
    if db.on_postgres():
        return postgres_percentiles(job, since, now)
    return sampled_percentiles(job, since, now)


def postgres_percentiles(
    job: Job, since: dict[int, datetime], now: datetime
) -> dict[int, dict[str, Any]]:
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


def sampled_percentiles(
    job: Job, since: dict[int, datetime], now: datetime
) -> dict[int, dict[str, Any]]:
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


def cached_failure_heatmap_rows(
    now: datetime, projects: tuple[str, ...] | None = None
) -> list[tuple[str, str, dict[int, tuple[int, int]]]]:
    """`failure_heatmap_rows(now, projects=projects)`, reused for the rest
    of `now`'s minute (per set of projects)."""
    key = f"croniq:heatmap:{now:%Y-%m-%dT%H:%M}"
    if projects is not None:
        key += ":" + hashlib.sha256(",".join(projects).encode()).hexdigest()[:16]
    read = lambda: failure_heatmap_rows(now, projects=projects)  # noqa: E731
    return cache.get_or_set(key, read, HEATMAP_CACHE_SECONDS)


def failure_heatmap_rows(
    now: datetime,
    hours: int = HEATMAP_HOURS,
    jobs: int = HEATMAP_JOBS,
    projects: tuple[str, ...] | None = None,
) -> list[tuple[str, str, dict[int, tuple[int, int]]]]:
    """[(label, job name, {bucket: (failed, total)})] of the runs settled in
    the last `hours` clock hours (bucket 0 the oldest): all jobs together,
    then the `jobs` jobs with the most failures; the jobs of `projects`
    alone when given (None: every project). Four queries on the
    `exec_state_finished` and `exec_job_state_finished` indexes."""
    starts = charts.hour_buckets(now, hours)
    first, end = starts[0], starts[-1] + charts.HOUR
    runs = settled_runs()
    if projects is None:
        rows = [("All jobs", "", hourly_counts(starts))]
    else:
        runs = runs.filter(job__in=Job.objects.filter(project__in=projects))
        rows = [("All jobs", "", bucket_counts(runs, first, end).get(None, {}))]
    worst = list(
        runs.filter(state__in=FAILING, finished_at__gte=first, finished_at__lt=end)
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


def hourly_counts(starts: list[datetime]) -> dict[int, tuple[int, int]]:
    """{bucket: (failed, total)} of all jobs, for the hours that had runs."""
    hours = [(start, start + charts.HOUR) for start in starts]
    counts = scalar_counts(
        [(FAILING, None, start, end) for start, end in hours]
        + [(SETTLED, None, start, end) for start, end in hours]
    )
    failed, total = counts[: len(hours)], counts[len(hours) :]
    return {i: (failed[i], total[i]) for i in range(len(hours)) if total[i]}


def job_hourly_counts(
    job_ids: list[int], first: datetime, end: datetime
) -> dict[int, dict[int, tuple[int, int]]]:
    """{job_id: {bucket: (failed, total)}} of a few jobs."""
    return bucket_counts(settled_runs().filter(job_id__in=job_ids), first, end, "job_id")


def bucket_counts(
    runs: QuerySet, first: datetime, end: datetime, per: str | None = None
) -> dict[Any, dict[int, tuple[int, int]]]:
    """{value of `per` (None: all `runs` together): {bucket: (failed, total)}}
    of the settled `runs` that finished in [first, end)."""
    bucket = RawSQL(HOUR_BUCKET_SQL[db.vendor()], [int(first.timestamp())])
    keys = [per, "bucket"] if per else ["bucket"]
    rows = (
        runs.filter(finished_at__gte=first, finished_at__lt=end)
        .annotate(bucket=bucket)
        .values(*keys)
        .annotate(failed=Count("pk", filter=Q(state__in=FAILING)), total=Count("pk"))
        .order_by()
    )
    counts: dict[Any, dict[int, tuple[int, int]]] = defaultdict(dict)
    for row in rows:
        counts[row[per] if per else None][row["bucket"]] = (row["failed"], row["total"])
    return dict(counts)
