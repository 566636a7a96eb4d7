"""The job page's insight (durations over time, percentiles, success rate)
and the overview's failure heat-map, read from the database."""

import re
from datetime import timedelta

import pytest
import time_machine
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboard import run_stats
from dashboard.stats import percentiles
from scheduler.jobs.job_health import JobHealth
from scheduler.models import Execution
from tests.dashboard.conftest import NOW
from tests.dashboard.test_pages import JOB_QUERIES, OVERVIEW_QUERIES

only_sqlite = pytest.mark.skipif(
    "connection.vendor != 'sqlite'", reason="SQLite reads a bounded sample"
)


@pytest.fixture
def make_run(make_execution):
    """A run scheduled `ago` before NOW that took `seconds`."""

    def make(job, ago, seconds=10.0, state=Execution.SUCCEEDED, attempt=1):
        at = NOW - ago
        started = at + timedelta(seconds=1)
        return make_execution(
            job,
            at,
            attempt=attempt,
            state=state,
            claimed_at=started,
            finished_at=started + timedelta(seconds=seconds),
        )

    return make


def H(hours):
    return timedelta(hours=hours)


def D(days):
    return timedelta(days=days)


# Durations over time


def test_duration_runs_are_the_finished_runs_oldest_first_with_database_seconds(
    make_job, make_run, make_execution
):
    job = make_job()
    old = make_run(job, H(5), seconds=90.25)
    failed = make_run(job, H(3), seconds=2, state=Execution.FAILED)
    make_execution(job, NOW, state=Execution.PENDING)  # no duration yet
    make_execution(job, NOW - H(1), state=Execution.RUNNING, claimed_at=NOW - H(1))

    runs = run_stats.duration_runs(job)

    assert [run.pk for run in runs] == [old.pk, failed.pk]
    assert runs[0].seconds == pytest.approx(90.25, abs=0.001)
    assert abs(runs[0].started_at - old.claimed_at) < timedelta(milliseconds=1)
    assert [run.failed for run in runs] == [False, True]


def test_duration_runs_keep_only_the_newest_up_to_the_limit(make_job, make_run):
    job = make_job()
    runs = [make_run(job, H(h)) for h in range(12, 0, -1)]
    assert [run.pk for run in run_stats.duration_runs(job, limit=5)] == [r.pk for r in runs[-5:]]


# Statistics over 7 and 30 days


@pytest.fixture
def month_of_runs(make_job, make_run):
    """Durations 1..20 s in the last week, 100..109 s before it; some failures,
    one cancelled (no verdict), one finishing after NOW (not yet)."""
    job = make_job()
    for i in range(20):
        state = Execution.FAILED if i % 5 == 0 else Execution.SUCCEEDED
        make_run(job, H(i + 1), seconds=i + 1.0, state=state)
    for i in range(10):
        make_run(job, D(10 + i), seconds=100.0 + i, state=Execution.SUCCEEDED)
    make_run(job, D(2), seconds=500, state=Execution.CANCELLED)
    make_run(job, D(40), seconds=900, state=Execution.FAILED)  # outside 30 days
    make_run(job, -H(2), seconds=700, state=Execution.SUCCEEDED)  # after now
    return job


def test_success_rate_counts_settled_runs_in_each_window(month_of_runs):
    week, month = run_stats.run_stats(month_of_runs, NOW)

    assert (week.days, week.settled, week.succeeded) == (7, 20, 16)
    assert week.success_rate == 0.8
    assert (month.days, month.settled, month.succeeded) == (30, 30, 26)


def test_percentiles_cover_the_finished_runs_of_each_window(month_of_runs):
    week, month = run_stats.run_stats(month_of_runs, NOW)

    week_durations = [i + 1.0 for i in range(20)] + [500.0]  # the cancelled run ran
    month_durations = week_durations + [100.0 + i for i in range(10)]
    assert [week.p50, week.p95, week.p99] == [
        pytest.approx(p, abs=0.001) for p in percentiles(week_durations)
    ]
    assert [month.p50, month.p95, month.p99] == [
        pytest.approx(p, abs=0.001) for p in percentiles(month_durations)
    ]
    assert not week.sampled


def test_a_job_without_runs_has_no_rate_and_no_percentiles(make_job):
    week, month = run_stats.run_stats(make_job(), NOW)
    assert (week.settled, week.success_rate, week.p50, month.p99) == (0, None, None, None)


@only_sqlite
def test_sqlite_percentiles_read_only_the_newest_runs(month_of_runs, monkeypatch):
    monkeypatch.setattr(run_stats, "STATS_SAMPLE", 5)
    week, month = run_stats.run_stats(month_of_runs, NOW)
    # The five newest runs: one not finished by NOW, then those of 1..4 s.
    assert week.p50 == month.p50 == pytest.approx(2.5, abs=0.001)
    assert week.sampled and month.sampled
    assert month.settled == 30  # the counts are not sampled


def test_a_window_read_whole_is_not_marked_sampled(month_of_runs, monkeypatch):
    monkeypatch.setattr(run_stats, "STATS_SAMPLE", 31)  # the 7-day window fits
    week, month = run_stats.run_stats(month_of_runs, NOW)
    assert not week.sampled
    assert month.sampled == (connection.vendor == "sqlite")


def test_stats_are_two_queries_whatever_the_history(month_of_runs, django_assert_num_queries):
    with django_assert_num_queries(2):
        run_stats.run_stats(month_of_runs, NOW)


# Failure heat-map


def test_heatmap_counts_failed_and_settled_runs_per_clock_hour(make_job, make_execution):
    noisy, calm = make_job("noisy"), make_job("calm")

    def finished(job, at, state):
        make_execution(job, at - H(1), state=state, claimed_at=at - H(1), finished_at=at)

    now = NOW + timedelta(minutes=30)  # buckets: 13:00 yesterday .. 12:00 today
    finished(noisy, NOW + timedelta(minutes=10), Execution.FAILED)  # bucket 23
    finished(noisy, NOW, Execution.TIMED_OUT)  # 12:00 sharp: bucket 23
    finished(noisy, NOW - timedelta(seconds=1), Execution.SUCCEEDED)  # 11:59:59: bucket 22
    finished(calm, NOW - H(23), Execution.SUCCEEDED)  # 13:00 yesterday: bucket 0
    finished(calm, NOW - H(23) - timedelta(seconds=1), Execution.FAILED)  # too old
    finished(calm, NOW - H(5) + timedelta(minutes=1), Execution.CANCELLED)  # no verdict
    finished(calm, NOW - H(5), Execution.LOST)

    rows = run_stats.failure_heatmap_rows(now)

    everything, noisy_row, calm_row = rows
    assert everything == ("All jobs", "", {23: (2, 2), 22: (0, 1), 0: (0, 1), 18: (1, 1)})
    assert noisy_row == ("noisy", "noisy", {23: (2, 2), 22: (0, 1)})
    assert calm_row == ("calm", "calm", {0: (0, 1), 18: (1, 1)})


def test_heatmap_lists_the_jobs_failing_most_and_no_more(make_job, make_execution):
    jobs = [make_job(f"job-{i}") for i in range(4)]
    for i, job in enumerate(jobs):
        for n in range(i):
            at = NOW - timedelta(minutes=n)
            make_execution(job, at, state=Execution.FAILED, claimed_at=at, finished_at=at)

    rows = run_stats.failure_heatmap_rows(NOW, jobs=2)

    assert [label for label, _, _ in rows] == ["All jobs", "job-3", "job-2"]


def test_heatmap_of_a_quiet_day_is_one_row_in_one_query(db, django_assert_num_queries):
    with django_assert_num_queries(2):
        rows = run_stats.failure_heatmap_rows(NOW)
    assert rows == [("All jobs", "", {})]


# Pages


def test_job_page_draws_each_run_at_its_start_time_and_marks_failures(
    staff_client, make_job, make_run
):
    job = make_job("nightly-report")
    ok = make_run(job, H(3), seconds=30)
    bad = make_run(job, H(2), seconds=60, state=Execution.FAILED)
    JobHealth.objects.create(job=job, failure_streak=1, failing_since=bad.finished_at)

    with time_machine.travel(NOW, tick=False):
        html = staff_client.get(reverse("dashboard:job", args=[job.name])).content.decode()

    assert re.search(rf'data-run="{ok.pk}"><circle class="point state-succeeded"', html)
    failure = rf'data-run="{bad.pk}"><path class="point failed state-failed" data-failed'
    assert re.search(failure, html)
    assert html.count("data-time-tick") >= 2
    assert "2026-11-30 10:00" in html
    assert "1 in a row since" in html.split("data-insight-streak>")[1]
    week = html.split('data-window="7"')[1].split("</tr>")[0]
    assert "50.0 %" in week
    assert "45.0 s" in week  # p50 of 30 s and 60 s


def test_job_page_with_a_thousand_runs_draws_a_thousand_points(
    staff_client, make_job, make_run, django_assert_max_num_queries
):
    job = make_job()
    Execution.objects.bulk_create(
        Execution(
            job=job,
            scheduled_for=NOW - timedelta(minutes=i),
            run_after=NOW,
            created_at=NOW,
            state=Execution.FAILED if i % 10 == 0 else Execution.SUCCEEDED,
            claimed_at=NOW - timedelta(minutes=i),
            finished_at=NOW - timedelta(minutes=i) + timedelta(seconds=1 + i % 30),
        )
        for i in range(run_stats.CHART_POINTS + 20)
    )
    with time_machine.travel(NOW, tick=False), django_assert_max_num_queries(JOB_QUERIES):
        html = staff_client.get(reverse("dashboard:job", args=[job.name])).content.decode()
    assert html.count('class="point') == run_stats.CHART_POINTS
    assert html.count("data-failed") == run_stats.CHART_POINTS // 10


def test_overview_shows_the_failure_heatmap(staff_client, make_job, make_run):
    job = make_job("flaky")
    make_run(job, H(2), seconds=10, state=Execution.FAILED)
    make_run(job, H(2) - timedelta(minutes=5), seconds=10)

    with time_machine.travel(NOW, tick=False):
        html = staff_client.get(reverse("dashboard:overview")).content.decode()

    heatmap = html.split("data-failure-heatmap")[1].split("</section>")[0]
    assert 'data-heat-row="all"' in heatmap
    assert 'data-heat-row="flaky"' in heatmap
    assert 'href="/jobs/flaky/"' in heatmap
    # Both settled 10:00-11:00 UTC: one of two failed.
    assert heatmap.count('class="heat heat-3" x=') == 2
    assert "10:00–11:00 UTC: 1 failed of 2 (50%)" in heatmap
    assert heatmap.count('class="heat heat-none"') == 2 * 23


def test_overview_query_count_with_failing_jobs_stays_bounded(
    staff_client, make_job, make_run, django_assert_max_num_queries
):
    for i in range(run_stats.HEATMAP_JOBS + 5):
        make_run(make_job(f"job-{i:02}"), H(1), state=Execution.FAILED)
    with time_machine.travel(NOW, tick=False), django_assert_max_num_queries(OVERVIEW_QUERIES):
        html = staff_client.get(reverse("dashboard:overview")).content.decode()
    assert html.count("data-heat-row=") == 1 + run_stats.HEATMAP_JOBS


# The outcome indexes serve these counts, and only the queries that name them


def query_plan(sql, params):
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return " ".join(str(row[-1]) for row in cursor.fetchall())


@only_sqlite
def test_heatmap_and_window_counts_read_the_outcome_indexes_alone(make_job, make_run):
    job = make_job()
    make_run(job, H(1))
    since = NOW - D(7)
    with CaptureQueriesContext(connection) as captured:
        run_stats.failure_heatmap_rows(NOW)
        run_stats.scalar_counts([(run_stats.SETTLED, job.pk, since, NOW)])
    plans = [query_plan(query["sql"], []) for query in captured.captured_queries]
    assert "COVERING INDEX exec_state_finished" in plans[0]
    assert "COVERING INDEX exec_job_state_finished" in plans[-1]


@only_sqlite
@pytest.mark.parametrize("index", ["exec_state_finished", "exec_job_state_finished"])
def test_a_query_for_a_jobs_newest_successes_cannot_use_the_outcome_indexes(make_job, index):
    # The shape of the slow-run detector's read (notifications.detectors): an
    # outcome index would make it sort the job's whole history. Forced onto
    # one, SQLite finds no plan: the index's condition does not hold for it.
    newest = (
        Execution.objects.filter(
            job=make_job(),
            state=Execution.SUCCEEDED,
            claimed_at__isnull=False,
            finished_at__isnull=False,
        )
        .order_by("-scheduled_for")
        .values_list("claimed_at", "finished_at")[:20]
    )
    sql, params = newest.query.sql_with_params()
    table = '"scheduler_execution"'
    forced = sql.replace(f"FROM {table}", f"FROM {table} INDEXED BY {index}", 1)
    assert forced != sql
    with pytest.raises(OperationalError, match="no query solution"):
        query_plan(forced, params)
