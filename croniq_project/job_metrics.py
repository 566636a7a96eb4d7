"""The per-job series of /metrics (docs/design.md §4): last success and
failure, runs by final state, and the period between the next two fire
times, from one read of the jobs joined to their health rows. The periods
are kept across scrapes per schedule (`PERIODS`).
"""

import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, NamedTuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

logger = logging.getLogger("croniq_project.collector")  # the logger of /metrics

# Exported at 0 before the first such run, so `increase()` sees the first
# failure too; the rarer states appear once they happened (six series for
# each of 2,000 jobs would triple the size of a scrape).
ALWAYS_COUNTED = ("succeeded", "failed")


TIMING = ("schedules", "at", "not_before", "not_after", "max_runs", "scheduled_runs")


class JobRow(NamedTuple):
    name: str
    singleton: bool
    overlap: str
    run_on: str
    quarantined: bool
    active: bool
    schedule: str
    timezone: str
    calendar_id: int | None
    calendar_policy: str
    next_run_at: datetime | None
    last_success_at: datetime | None
    last_failure_at: datetime | None
    runs: tuple  # counts in JobHealth.COUNTED_STATES order; zeros without a health row
    # schedules, at, not_before, not_after, max_runs, scheduled_runs (docs/design.md §14)
    timing: tuple = ([], [], None, None, None, 0)


def job_rows() -> list[JobRow]:
    """Every job with its health, in one LEFT JOIN: the series it feeds are
    bounded by the job count, never by the history."""
    from scheduler.models import Job, JobHealth

    counted = [f"health__{state}" for state in JobHealth.COUNTED_STATES]
    rows = Job.objects.order_by("name").values_list(
        "name",
        "singleton",
        "overlap",
        "run_on",
        "error",
        "enabled",
        "paused_at",
        "schedule",
        "timezone",
        "calendar_id",
        "calendar_policy",
        "next_run_at",
        "health__last_success_at",
        "health__last_failure_at",
        *TIMING,
        *counted,
    )
    jobs = []
    for name, singleton, overlap, run_on, error, enabled, paused_at, *rest in rows:
        quarantined = bool(error)
        active = enabled and paused_at is None and not quarantined
        schedule, last = rest[:5], rest[5:7]
        timing, runs = tuple(rest[7:13]), tuple(count or 0 for count in rest[13:])
        jobs.append(
            JobRow(
                name,
                singleton,
                overlap,
                run_on,
                quarantined,
                active,
                *schedule,
                *last,
                runs,
                timing,
            )
        )
    return jobs


def job_families(jobs: list[JobRow], now: datetime) -> Iterator[Metric]:
    from audit.recording import label_value
    from scheduler.models import JobHealth

    success = GaugeMetricFamily(
        "croniq_job_last_success_timestamp_seconds",
        "Unix time of the job's last successful run (absent: it never succeeded).",
        labels=["job"],
    )
    failure = GaugeMetricFamily(
        "croniq_job_last_failure_timestamp_seconds",
        "Unix time of the job's last failing run: failed, timed out or lost (absent: never).",
        labels=["job"],
    )
    runs = CounterMetricFamily(
        "croniq_job_runs",
        "Runs of the job that reached a final state, by state "
        "(succeeded and failed always, the other states once they happened).",
        labels=["job", "state"],
    )
    period = GaugeMetricFamily(
        "croniq_job_period_seconds",
        "Seconds between the job's next two fire times (absent: disabled, paused, "
        "quarantined or not firing twice more).",
        labels=["job"],
    )
    periods = job_periods(jobs, now)
    for job in jobs:
        name = label_value(job.name)
        if job.last_success_at is not None:
            success.add_metric([name], job.last_success_at.timestamp())
        if job.last_failure_at is not None:
            failure.add_metric([name], job.last_failure_at.timestamp())
        for state, count in zip(JobHealth.COUNTED_STATES, job.runs, strict=True):
            if count or state in ALWAYS_COUNTED:
                runs.add_metric([name, state], count)
        if job.name in periods:
            period.add_metric([name], periods[job.name])
    yield from (success, failure, runs, period)


class PeriodCache:
    """Seconds between the next two fire times, per (schedule, timezone,
    calendar rules, calendar policy): 2,000 jobs share far fewer schedules.

    An answer stands until the first of those two instants passes, so it is
    kept across scrapes: a scrape recomputes only the schedules that fired
    since the last one.
    """

    LIMIT = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept = {}

    def get(self, key: tuple[Any, ...], now: datetime) -> tuple[bool, float | None]:
        """(found, seconds or None): found when computed for an instant
        between the one it was computed at and the first fire time."""
        with self._lock:
            kept = self._kept.get(key)
        if kept is None or not kept[0] <= now < kept[1]:
            return False, None
        return True, kept[2]

    def put(
        self, key: tuple[Any, ...], now: datetime, until: datetime, seconds: float | None
    ) -> None:
        with self._lock:
            if len(self._kept) >= self.LIMIT:
                self._kept.clear()
            self._kept[key] = (now, until, seconds)


PERIODS = PeriodCache()
# A schedule that never fires twice does not start to later.
NEVER = datetime.max.replace(tzinfo=UTC)


def job_periods(jobs: list[JobRow], now: datetime) -> dict[str, float]:
    """{job name: seconds between its next two fire times} for active jobs."""
    active = [job for job in jobs if job.active]
    # The calendars as they are now, part of the cache key: an edited
    # calendar (or one of its periods) is a new key.
    calendars = calendar_rules_by_id() if any(j.calendar_id for j in active) else {}
    periods = {}
    for job in active:
        if job.calendar_id is not None and job.calendar_id not in calendars:
            continue  # a calendar that cannot be evaluated (logged)
        rules = calendars.get(job.calendar_id)
        key = (job.schedule, job.timezone, rules, job.calendar_policy, repr(job.timing))
        found, seconds = PERIODS.get(key, now)
        if not found:
            until, seconds = next_period(job, now, calendars)
            PERIODS.put(key, now, until, seconds)
        if seconds is not None:
            periods[job.name] = seconds
    return periods


def next_period(
    row: JobRow, now: datetime, calendars: dict[int, Any]
) -> tuple[datetime, float | None]:
    """(valid until, seconds or None) for a job like `row`."""
    from scheduler.models import Job

    job = Job(
        schedule=row.schedule,
        timezone=row.timezone,
        calendar_id=row.calendar_id,
        calendar_policy=row.calendar_policy,
        next_run_at=row.next_run_at,
        **dict(zip(TIMING, row.timing, strict=True)),
    )
    job.calendar_rules(shared=calendars)
    try:
        fires = job.upcoming(now, 2)
    except ValueError:  # ScheduleError, RulesError: quarantine's business
        return NEVER, None
    if len(fires) < 2:
        return (fires[0] if fires else NEVER), None
    return fires[0], (fires[1] - fires[0]).total_seconds()


def calendar_rules_by_id() -> dict[int, Any]:
    """{calendar id: CalendarRules} of every calendar in two queries (the
    calendars, their periods); base chains are linked in memory."""
    from calendars.models import Calendar

    calendars = {calendar.pk: calendar for calendar in Calendar.objects.prefetch_related("periods")}
    for calendar in calendars.values():
        if calendar.base_id is not None:
            calendar.base = calendars.get(calendar.base_id)
    rules = {}
    for pk, calendar in calendars.items():
        try:
            rules[pk] = calendar.rules()
        except ValueError as e:
            logger.warning("metrics: calendar %r cannot be evaluated: %s", calendar.name, e)
    return rules
