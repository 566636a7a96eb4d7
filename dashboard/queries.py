"""The dashboard's reads. Each function issues a fixed, small number of queries
whatever the size of the tables, so pages stay fast with 2,000 jobs and a
million executions: nothing here counts or loads a whole history.
"""

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import (
    Count,
    Min,
    OuterRef,
    QuerySet,
    Subquery,
)
from django.utils import timezone
from django.utils.dateparse import parse_datetime

import audit
from audit.models import AuditEvent, Counter
from dashboard.job_filters import state_condition
from dispatch import coverage, liveness
from notifications.models import Delivery, Mute, Notification
from runners.models import Runner
from scheduler.models import Execution, Job, JobHealth, LogChunk

STRIP_LENGTH = 20
JOBS_PER_PAGE = 50
HISTORY_PER_PAGE = 50
AUDIT_PER_PAGE = 50
LOG_CHUNKS_PER_POLL = 500
RUNNERS_LIMIT = 500
NOTIFICATIONS_PER_PAGE = 50
FAILING_JOBS_LIMIT = 100
MUTES_LIMIT = 100


class Page:
    """One page of a listing, found without COUNT(*): fetch one row more than
    the page holds to know whether a next page exists."""

    def __init__(self, rows: list[Any], number: int, per_page: int) -> None:
        self.number = number
        self.has_next = len(rows) > per_page
        self.items = rows[:per_page]
        self.has_previous = number > 1
        self.next_number = number + 1
        self.previous_number = number - 1


def cheap_page(queryset: QuerySet, number: int, per_page: int) -> Page:
    start = (number - 1) * per_page
    return Page(list(queryset[start : start + per_page + 1]), number, per_page)


def page_number(value: object) -> int:
    """A page number from a query string value; anything odd means page 1."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return 1
    return min(max(number, 1), 100_000)


# Overview


def live_counts(projects: tuple[str, ...] | None = None) -> dict[str, int]:
    """Pending and running executions right now (of the jobs of `projects`,
    None for every one): both states have a partial index, so these counts
    never read the finished history."""
    runs = Execution.objects.all()
    if projects is not None:
        # A join, not `job_id IN (...)`: SQLite then reads the state's partial
        # index, not every run of the projects' jobs.
        runs = runs.filter(job__project__in=projects)
    return {
        Execution.PENDING: runs.filter(state=Execution.PENDING).count(),
        Execution.RUNNING: runs.filter(state=Execution.RUNNING).count(),
    }


def finished_totals() -> dict[str, int]:
    """Finished executions by state since the start, from the persisted
    `croniq_executions_total{state}` counters that /metrics exposes too
    (a GROUP BY over a million rows would read the whole table)."""
    totals = {}
    for counter in Counter.objects.filter(name="croniq_executions_total"):
        state = counter.label_dict().get("state", "")
        totals[state] = totals.get(state, 0) + counter.value
    return totals


def state_counts(projects: tuple[str, ...] | None = None) -> list[tuple[str, str, int]]:
    """[(state, label, count)] in the model's order of states. For some
    `projects` only the live states: the finished totals are counted for
    every project together."""
    if projects is not None:
        live = live_counts(projects)
        return [(state, label, live[state]) for state, label in Execution.STATES if state in live]
    counts = {**finished_totals(), **live_counts()}
    return [(state, label, counts.get(state, 0)) for state, label in Execution.STATES]


def runner_counts() -> dict[str, int]:
    rows = Runner.objects.values("state").annotate(n=Count("id"))
    counts = {row["state"]: row["n"] for row in rows}
    counts["flapping"] = Runner.objects.filter(flapping=True).count()
    return counts


def scheduler_lag(now: datetime) -> dict[str, Any]:
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


# The overview's counters of jobs that need a look, each a link to the
# job list filtered to that state (dashboard.job_filters).
JOB_COUNTERS = ("failing", "paused", "waiting")


def job_filter_counts(now: datetime, jobs: QuerySet | None = None) -> dict[str, int]:
    """{state: how many of `jobs` (every job by default) are in it}: a count
    over the jobs (a few thousand rows at most), never over the executions'
    history."""
    jobs = Job.objects.all() if jobs is None else jobs
    return jobs.aggregate(
        **{state: Count("pk", filter=state_condition(state, now)) for state in JOB_COUNTERS}
    )


def jobs_page(number: int, per_page: int = JOBS_PER_PAGE, jobs: QuerySet | None = None) -> Page:
    """A page of `jobs` (every job by default), by name."""
    jobs = Job.objects.all() if jobs is None else jobs
    return cheap_page(jobs.select_related("calendar").order_by("name"), number, per_page)


class PendingWork(NamedTuple):
    count: int
    since: datetime
    why: coverage.Waiting


def pending_work(
    jobs: list[Job], now: datetime, runners: coverage.Coverage | None = None
) -> dict[int, PendingWork]:
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
    # The labels, and the features only some agents support (docs/design.md §4).
    labels = {job.pk: job.requirements for job in jobs}
    for job_id, n, since in rows:
        found[job_id] = PendingWork(n, since, runners.why_waiting(labels[job_id], since, now))
    return found


class StripRun(NamedTuple):
    pk: int
    job_id: int
    state: str
    scheduled_for: datetime
    attempt: int


def recent_results(job_ids: list[int], per_job: int = STRIP_LENGTH) -> dict[int, list[StripRun]]:
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


def recent_results_sql(job_ids: list[int], per_job: int) -> tuple[str, list[int]]:
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


def as_utc(value: str | datetime) -> datetime:
    """A datetime column read through a raw cursor: SQLite hands back text."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if timezone.is_naive(value):
        value = value.replace(tzinfo=UTC)
    return value


# Job page


def job_history(job: Job, number: int, state: str = "", per_page: int = HISTORY_PER_PAGE) -> Page:
    """A page of the job's runs, newest first, optionally in one state only
    (read newest-first through the job's history index)."""
    runs = Execution.objects.filter(job=job).select_related("runner")
    if state:
        runs = runs.filter(state=state)
    return cheap_page(runs.order_by("-scheduled_for", "-attempt"), number, per_page)


# Execution page


def why_waiting(execution: Execution, now: datetime) -> coverage.Waiting | None:
    """Why a pending execution has not started (None for any other)."""
    if execution.state != Execution.PENDING:
        return None
    return coverage.Coverage.read().why_waiting(
        execution.job.requirements, execution.run_after, now
    )


def log_chunks(
    execution: Execution, after: int = -1, limit: int | None = None
) -> list[tuple[int, str]]:
    chunks = LogChunk.objects.filter(execution=execution, seq__gt=after).order_by("seq")
    if limit is not None:
        chunks = chunks[:limit]
    return list(chunks.values_list("seq", "data"))


def execution_attempts(execution: Execution) -> list[Execution]:
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


def runners_with_work(now: datetime, state: str = "", limit: int = RUNNERS_LIMIT) -> list[Runner]:
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
        runner.liveness = liveness.liveness(runner.state, runner.last_seen_at, now)
        runner.shown_state = liveness.shown_state(runner.state, runner.liveness)
    return runners


# Audit page


def audit_events(
    action: str = "",
    actor: str = "",
    target: str = "",
    number: int = 1,
    per_page: int = AUDIT_PER_PAGE,
) -> Page:
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


def notifications_page(
    number: int, state: str = "", per_page: int = NOTIFICATIONS_PER_PAGE
) -> Page:
    """Newest notifications first (the `notification_created` index), each
    with the latency of its last delivery try, in one query."""
    last_try = Delivery.objects.filter(notification=OuterRef("pk")).order_by("-attempt")
    notifications = Notification.objects.select_related("channel", "job").annotate(
        last_latency=Subquery(last_try.values("latency")[:1])
    )
    if state:
        notifications = notifications.filter(state=state)
    return cheap_page(notifications.order_by("-created_at", "-id"), number, per_page)


def notification_counts(now: datetime, hours: int = 24) -> list[tuple[str, str, int]]:
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


def active_mutes(now: datetime, limit: int = MUTES_LIMIT) -> list[Mute]:
    """Mutes still in force, the one ending first on top."""
    mutes = Mute.objects.filter(until__gt=now).select_related("rule", "job")
    return list(mutes.order_by("until", "id")[:limit])


def failing_jobs(limit: int = FAILING_JOBS_LIMIT) -> list[JobHealth]:
    """Jobs on a failure streak, longest streak first, then failing longest."""
    health = JobHealth.objects.filter(failure_streak__gt=0).select_related("job")
    return list(health.order_by("-failure_streak", "failing_since", "job__name")[:limit])
