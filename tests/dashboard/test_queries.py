from datetime import timedelta

from django.db import connection

from dashboard import queries
from scheduler.models import Execution
from tests.dashboard.conftest import NOW


def test_recent_results_keeps_the_newest_twenty_runs_of_each_job(make_job, make_history):
    busy, quiet = make_job("busy"), make_job("quiet")
    busy_runs = make_history(busy, 30)
    quiet_runs = make_history(quiet, 3)

    results = queries.recent_results([busy.pk, quiet.pk])

    assert [e.pk for e in results[busy.pk]] == [e.pk for e in busy_runs[:20]]
    assert [e.pk for e in results[quiet.pk]] == [e.pk for e in quiet_runs]


def test_recent_results_orders_retries_of_one_instant_newest_attempt_first(
    make_job, make_execution
):
    job = make_job()
    first = make_execution(job, NOW, attempt=1, state=Execution.LOST)
    retry = make_execution(job, NOW, attempt=2, state=Execution.SUCCEEDED)
    older = make_execution(job, NOW - timedelta(hours=1))

    assert [e.pk for e in queries.recent_results([job.pk])[job.pk]] == [
        retry.pk,
        first.pk,
        older.pk,
    ]


def test_recent_results_leaves_out_jobs_not_asked_for_and_jobs_without_runs(make_job, make_history):
    asked, other, idle = make_job(), make_job(), make_job()
    make_history(asked, 2)
    make_history(other, 2)

    results = queries.recent_results([asked.pk, idle.pk])

    assert set(results) == {asked.pk}
    assert queries.recent_results([]) == {}


def test_recent_results_is_one_query_for_a_page_of_jobs(
    make_job, make_history, django_assert_num_queries
):
    jobs = [make_job() for _ in range(queries.JOBS_PER_PAGE)]
    for job in jobs[:5]:
        make_history(job, 25)
    with django_assert_num_queries(1):
        queries.recent_results([job.pk for job in jobs])


def test_a_page_knows_whether_a_next_page_exists_without_counting(
    make_job, django_assert_num_queries
):
    for _ in range(5):
        make_job()
    with django_assert_num_queries(1) as captured:
        first = queries.jobs_page(1, per_page=2)
    assert "COUNT(" not in captured.captured_queries[0]["sql"].upper()
    last = queries.jobs_page(3, per_page=2)

    assert (first.has_previous, first.has_next, len(first.items)) == (False, True, 2)
    assert (last.has_previous, last.has_next, len(last.items)) == (True, False, 1)


def test_page_numbers_from_the_query_string_fall_back_to_the_first_page():
    assert queries.page_number("3") == 3
    assert queries.page_number(None) == 1
    assert queries.page_number("abc") == 1
    assert queries.page_number("-2") == 1


def test_state_counts_take_live_states_from_rows_and_finished_ones_from_counters(
    make_job, make_execution
):
    import audit

    job = make_job()
    make_execution(job, NOW, state=Execution.PENDING)
    make_execution(job, NOW - timedelta(minutes=1), state=Execution.RUNNING)
    make_execution(job, NOW - timedelta(minutes=2), state=Execution.RUNNING)
    audit.increment("croniq_executions_total", 7, state="succeeded")
    audit.increment("croniq_executions_total", 2, state="failed")

    counts = {state: n for state, _, n in queries.state_counts()}

    assert counts["pending"] == 1
    assert counts["running"] == 2
    assert counts["succeeded"] == 7
    assert counts["failed"] == 2
    assert counts["lost"] == 0


def test_scheduler_lag_is_the_age_of_the_oldest_due_active_job(make_job):
    from django.utils import timezone

    make_job(next_run_at=NOW - timedelta(seconds=90))
    make_job(next_run_at=NOW - timedelta(hours=5), enabled=False)
    make_job(next_run_at=NOW - timedelta(hours=3), paused_at=NOW)
    make_job(next_run_at=NOW + timedelta(minutes=5))

    assert queries.scheduler_lag(NOW)["trigger"] == timedelta(seconds=90)
    assert queries.scheduler_lag(NOW - timedelta(hours=1))["trigger"] == timedelta(0)
    assert timezone.is_aware(NOW)


def test_runners_come_with_the_executions_they_are_running(
    make_job, make_execution, make_runner, django_assert_num_queries
):
    busy = make_runner("busy")
    make_runner("idle")
    job = make_job()
    running = make_execution(job, NOW, state=Execution.RUNNING, runner=busy, claimed_at=NOW)
    make_execution(job, NOW - timedelta(hours=1), runner=busy)  # finished: not current work

    with django_assert_num_queries(2):
        runners = {r.name: r for r in queries.runners_with_work(NOW)}
        assert [e.job.name for e in runners["busy"].current_work] == [job.name]

    assert [e.pk for e in runners["busy"].current_work] == [running.pk]
    assert runners["idle"].current_work == []


def test_log_chunks_after_a_seq_are_returned_in_order(make_job, make_execution, add_log):
    execution = make_execution(make_job(), state=Execution.RUNNING)
    add_log(execution, "a\n", "b\n", "c\n")

    assert queries.log_chunks(execution) == [(0, "a\n"), (1, "b\n"), (2, "c\n")]
    assert queries.log_chunks(execution, after=0) == [(1, "b\n"), (2, "c\n")]
    assert queries.log_chunks(execution, after=0, limit=1) == [(1, "b\n")]
    assert queries.log_chunks(execution, after=2) == []


def test_each_job_in_the_strip_query_is_an_index_search_cut_at_twenty_rows(make_job, make_history):
    jobs = [make_job() for _ in range(3)]
    for job in jobs:
        make_history(job, 30)
    sql, params = queries.recent_results_sql([job.pk for job in jobs], queries.STRIP_LENGTH)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            plan = [row[-1] for row in cursor.fetchall()]
            reads = [line for line in plan if "scheduler_execution" in line]
            assert len(reads) == 3
            assert all(line.startswith("SEARCH") and "(job_id=?)" in line for line in reads)
        else:
            cursor.execute("EXPLAIN " + sql, params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert plan.count("Limit") == 3
            assert "job_id = " in plan
