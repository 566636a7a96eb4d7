"""The forecast's database side: the jobs the loop fires as `JobLoad` values
(each calendar read once, the expected durations in one query)."""

import statistics
from collections import defaultdict
from collections.abc import Iterable
from contextlib import nullcontext
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from core import db
from scheduler.forecast.contention import DueRun
from scheduler.forecast.core import DEFAULT_SECONDS, HISTORY_RUNS, JobLoad
from scheduler.forecast.fires import WithinWindow, delayed, failing, job_fires, schedule_fires
from scheduler.jobs import fire_times

JOB_FIELDS = (
    "pk", "name", "schedule", "timezone", "calendar_id", "calendar_policy",
    "labels", "overlap", "max_concurrent", "max_queue", "timeout", "next_run_at", "jitter",
)  # fmt: skip
# A job's timing beyond `schedule` (docs/design.md §14), read after JOB_FIELDS.
TIMING_FIELDS = ("schedules", "at", "not_before", "not_after", "max_runs", "scheduled_runs")


def job_loads(until: datetime) -> list[JobLoad]:
    """[JobLoad] of the jobs the loop fires (enabled, not paused, not
    quarantined), their instants up to `until`. Each calendar is read
    once; the durations in one query."""
    from scheduler.jobs.cron import parse_schedule, uses_key
    from scheduler.models import Job, jitter_offset

    rows = [
        row
        for row in Job.objects.filter(enabled=True, paused_at__isnull=True, error="")
        .order_by("pk")
        .values_list(*JOB_FIELDS, *TIMING_FIELDS)
        if row[2] or row[13] or row[14]  # run on register only: no instants to forecast
    ]
    durations = expected_seconds([row[0] for row in rows])
    calendars = calendar_rules({row[4] for row in rows if row[4] is not None})
    loads = []
    for row in rows:
        pk, name, schedule, tz, calendar_id, policy, labels = row[:7]
        overlap, max_concurrent, max_queue, timeout, anchor, jitter = row[7:13]
        timing = dict(zip(TIMING_FIELDS, row[13:], strict=True))
        rules = calendars.get(calendar_id)
        try:
            if isinstance(rules, Exception):
                raise rules
            if has_timing(timing):
                job = Job(
                    name=name, schedule=schedule, timezone=tz, calendar_id=calendar_id,
                    calendar_policy=policy, next_run_at=anchor, jitter=jitter, **timing,
                )  # fmt: skip
                if rules is not None:
                    job._calendar_rules = (calendar_id, WithinWindow(rules, until))
                every = fire_times.anchored_every(job)
                fires = job_fires(job, until)
                ends = job.not_after + job.offset if job.not_after is not None else None
                runs = job.runs_left
            else:
                ends = runs = None
                every = parse_schedule(schedule, key=name).every
                fires = schedule_fires(schedule, tz, rules, policy, until, anchor, key=name)
                fires = delayed(fires, jitter_offset(name, jitter), until)
        except ValueError as e:  # ScheduleError, RulesError
            every, fires, ends, runs = None, failing(e), None, None
        loads.append(
            JobLoad(
                name=name,
                labels=tuple(sorted(set(labels or ()))),
                seconds=expected(durations.get(pk), timeout),
                fires=fires,
                every=every,
                calendar=rules if not isinstance(rules, Exception) else None,
                overlap=overlap,
                max_concurrent=max_concurrent,
                max_queue=max_queue,
                ends=ends,
                runs=runs,
                # A cron schedule fires at the same instants for every job
                # on the same clock, calendar and policy; `@every` follows
                # each job's own grid, and an H form its own name's instants.
                key=None
                if every is not None or has_timing(timing)
                else (
                    schedule,
                    tz,
                    calendar_id,
                    policy,
                    name if uses_key(schedule) or jitter else None,
                ),
            )
        )
    return loads


def has_timing(timing: dict[str, Any]) -> bool:
    """Whether a job has more than its `schedule` to fire at, or a run limit."""
    return (
        any(timing[key] for key in ("schedules", "at", "not_before", "not_after"))
        or timing["max_runs"] is not None
    )


def expected(median: float | None, timeout: int | None) -> float:
    """A run's expected seconds: its job's recent median, else its timeout,
    else DEFAULT_SECONDS."""
    if median is not None:
        return max(median, 0.0)  # clocks that disagree must not make negative demand
    return float(timeout) if timeout else DEFAULT_SECONDS


def calendar_rules(ids: Iterable[int]) -> dict[int, Any]:
    """{calendar id: CalendarRules, or the RulesError it raised}, each
    calendar read once with its periods (a base adds its own queries)."""
    from calendars.models import Calendar

    found = {}
    for calendar in Calendar.objects.filter(pk__in=ids).prefetch_related("periods"):
        try:
            found[calendar.pk] = calendar.rules()
        except ValueError as e:
            found[calendar.pk] = e
    return found


# The newest successful runs of each job, one index range per job
# (`exec_job_state_finished`): a LATERAL join on PostgreSQL, which takes
# their median too; SQLite, which has neither, looks each job's run ids up
# in a correlated IN and Python takes the median. The states list repeats
# the partial index's own, which SQLite needs to use it.
HISTORY_SQL = {
    "postgresql": """
        SELECT j.id, r.median FROM {job} j CROSS JOIN LATERAL (
            SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s.seconds) AS median FROM (
                SELECT EXTRACT(EPOCH FROM e.finished_at - e.claimed_at)::float8 AS seconds
                FROM {execution} e
                WHERE e.job_id = j.id AND {settled} AND e.state = 'succeeded'
                  AND e.claimed_at IS NOT NULL
                ORDER BY e.finished_at DESC LIMIT %s
            ) s
        ) r WHERE j.id = ANY(%s)
    """,
    "sqlite": """
        SELECT e.job_id, (julianday(e.finished_at) - julianday(e.claimed_at)) * 86400.0
        FROM {job} j JOIN {execution} e ON e.id IN (
            SELECT e2.id FROM {execution} e2
            WHERE e2.job_id = j.id AND {settled2} AND e2.state = 'succeeded'
            ORDER BY e2.finished_at DESC LIMIT %s
        ) WHERE e.claimed_at IS NOT NULL AND j.id IN ({ids})
    """,
}


def expected_seconds(job_ids: list[int]) -> dict[int, float]:
    """{job id: median seconds of its newest successful runs} in one query;
    jobs without one are absent."""
    from scheduler.models import Execution, Job

    if not job_ids:
        return {}
    quote = connection.ops.quote_name
    settled = ", ".join(f"'{state}'" for state in Execution.SETTLED_STATES)
    sql = HISTORY_SQL[db.vendor()].format(
        job=quote(Job._meta.db_table),
        execution=quote(Execution._meta.db_table),
        settled=f"e.state IN ({settled})",
        settled2=f"e2.state IN ({settled})",
        ids=", ".join(str(int(pk)) for pk in job_ids),
    )
    # By design: PostgreSQL takes the median in SQL, SQLite's rows are medianed here.
    postgres = db.on_postgres()
    params = [HISTORY_RUNS] + ([list(job_ids)] if postgres else [])
    # SET LOCAL lasts for its transaction.
    with transaction.atomic() if postgres else nullcontext(), connection.cursor() as cursor:
        if postgres:
            # The planner takes a job's history for the average one (some
            # dozens of runs) and sorts it all; a job run every few seconds
            # has thousands. Reading the index backwards stops at the limit.
            cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if postgres:
        return {job_id: median for job_id, median in rows if median is not None}
    seconds = defaultdict(list)
    for job_id, value in rows:
        seconds[job_id].append(value)
    return {job_id: statistics.median(values) for job_id, values in seconds.items()}


def recorded_runs(since: datetime, until: datetime) -> list[tuple[DueRun, float]]:
    """The runs due in [since, until) that a runner claimed and finished, as
    the queue would take them (`DueRun`: the job's label set, the instant
    it was due, how long it held its slot) with the start delay each had
    (claimed_at - scheduled_for), in the order they were due: a replay of
    real runs to check the forecast's delays against."""
    from scheduler.models import Execution

    rows = (
        Execution.objects.filter(
            scheduled_for__gte=since,
            scheduled_for__lt=until,
            claimed_at__isnull=False,
            finished_at__isnull=False,
        )
        .order_by("scheduled_for", "pk")
        .values_list("job__labels", "scheduled_for", "claimed_at", "finished_at")
    )
    return [
        (
            DueRun(
                labels=tuple(sorted(set(labels or ()))),
                at=due,
                seconds=max((finished - claimed).total_seconds(), 0.0),
            ),
            (claimed - due).total_seconds(),
        )
        for labels, due, claimed, finished in rows
    ]
