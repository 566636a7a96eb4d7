"""0008 upgrades a database that holds jobs and executions: jobs declare no
parameters, executions carry no env overrides, and rows written without the
new columns (by a process not yet upgraded) get the same defaults."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0006_job_health_and_owner")]
AFTER = [("scheduler", "0008_triggers")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def test_existing_rows_get_empty_parameters_and_env():
    old = migrate(BEFORE)
    Job = old.get_model("scheduler", "Job")
    Execution = old.get_model("scheduler", "Execution")
    job = Job.objects.create(name="report", schedule="0 * * * *", command="true")
    Execution.objects.create(job=job, scheduled_for=T0, run_after=T0, created_at=T0)
    try:
        new = migrate(AFTER)
        assert new.get_model("scheduler", "Job").objects.get().parameters == []
        assert new.get_model("scheduler", "Execution").objects.get().env == {}
        with connection.cursor() as cursor:  # an old process's insert: no env column
            cursor.execute(
                'INSERT INTO scheduler_execution (job_id, scheduled_for, attempt, "trigger",'
                " state, singleton, run_after, session, lease, created_at, error, lost_reason,"
                " log_size, log_truncated) VALUES (%s, %s, 2, 'retry', 'pending', FALSE, %s,"
                " '', 0, %s, '', '', 0, FALSE)",
                [job.pk, T0, T0, T0],
            )
        assert new.get_model("scheduler", "Execution").objects.get(attempt=2).env == {}
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
