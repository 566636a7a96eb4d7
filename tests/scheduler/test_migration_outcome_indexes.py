"""0010 adds the dashboard's outcome indexes to a database that holds jobs
and executions; the heat-map and the job page's counts then read them."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from dashboard import run_stats
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0009_job_managed_source")]
AFTER = [("scheduler", "0010_execution_outcome_indexes")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
INDEXES = {"exec_state_finished", "exec_job_state_finished"}


def execution_indexes():
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "scheduler_execution")
    return {name for name, info in constraints.items() if info["index"]}


def test_existing_executions_are_indexed_and_counted():
    old = migrate(BEFORE)
    Job = old.get_model("scheduler", "Job")
    Execution = old.get_model("scheduler", "Execution")
    job = Job.objects.create(name="report", schedule="0 * * * *", command="true")
    for minutes, state in ((10, "succeeded"), (20, "failed"), (30, "succeeded")):
        at = T0 - dt.timedelta(minutes=minutes)
        Execution.objects.create(
            job=job,
            scheduled_for=at,
            run_after=at,
            created_at=at,
            state=state,
            claimed_at=at,
            finished_at=at + dt.timedelta(seconds=5),
        )
    assert not INDEXES & execution_indexes()
    try:
        migrate(AFTER)
        assert execution_indexes() >= INDEXES
        rows = run_stats.failure_heatmap_rows(T0)
        assert rows[0][2] == {22: (1, 3)}  # 11:00-12:00 UTC, the hour before T0
        assert rows[1][1] == "report"
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
