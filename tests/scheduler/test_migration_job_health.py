"""0006 upgrades a database that holds jobs and executions: each job's
health starts from its history."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0005_execution_retention_index")]
AFTER = [("scheduler", "0006_job_health_and_owner")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def test_existing_jobs_get_their_streak_counts_and_last_outcomes():
    old = migrate(BEFORE)
    Job = old.get_model("scheduler", "Job")
    Execution = old.get_model("scheduler", "Execution")
    failing = Job.objects.create(name="failing", schedule="0 * * * *", command="false")
    quiet = Job.objects.create(name="quiet", schedule="0 2 * * *", command="true")
    history = [
        # (hour, attempt, state): a success, then two hours that failed for
        # good (the second after a retry), and one still running.
        (0, 1, "succeeded"),
        (1, 1, "failed"),
        (2, 1, "timed_out"),
        (2, 2, "failed"),
        (3, 1, "running"),
    ]
    for hour, attempt, state in history:
        at = T0 + dt.timedelta(hours=hour)
        Execution.objects.create(
            job=failing,
            scheduled_for=at,
            attempt=attempt,
            run_after=at,
            created_at=at,
            state=state,
            finished_at=None if state == "running" else at + dt.timedelta(minutes=attempt),
        )
    try:
        new = migrate(AFTER)
        JobHealth = new.get_model("scheduler", "JobHealth")
        health = JobHealth.objects.get(job_id=failing.pk)
        assert health.failure_streak == 2
        assert health.failing_since == T0 + dt.timedelta(hours=1, minutes=1)
        assert health.last_success_at == T0 + dt.timedelta(minutes=1)
        assert health.last_failure_at == T0 + dt.timedelta(hours=2, minutes=2)
        assert health.last_state == "failed"
        assert (health.succeeded, health.failed, health.timed_out) == (1, 2, 1)
        idle = JobHealth.objects.get(job_id=quiet.pk)
        assert (idle.failure_streak, idle.last_success_at, idle.succeeded) == (0, None, 0)
        upgraded = new.get_model("scheduler", "Job").objects.get(pk=failing.pk)
        assert (upgraded.owner, upgraded.max_duration, upgraded.min_duration) == ("", None, None)
        assert new.get_model("scheduler", "Execution").objects.filter(state="running").count() == 1
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
