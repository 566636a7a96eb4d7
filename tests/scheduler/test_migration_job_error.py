"""0003_job_error upgrades a database that holds jobs and executions."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.migrations import migrate

BEFORE = [("scheduler", "0002_claim_order_index")]
AFTER = [("scheduler", "0003_job_error")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.mark.django_db(transaction=True)
def test_existing_jobs_upgrade_without_an_error_and_keep_their_schedule():
    old = migrate(BEFORE)
    Job = old.get_model("scheduler", "Job")
    Execution = old.get_model("scheduler", "Execution")
    job = Job.objects.create(
        name="nightly",
        schedule="0 2 * * *",
        command="true",
        next_run_at=T0,
        last_scheduled_at=T0 - dt.timedelta(days=1),
        singleton=True,
    )
    Execution.objects.create(
        job=job, scheduled_for=T0, run_after=T0, created_at=T0, state="running", singleton=True
    )
    try:
        new = migrate(AFTER)
        upgraded = new.get_model("scheduler", "Job").objects.get(pk=job.pk)
        assert (upgraded.error, upgraded.error_at) == ("", None)
        assert (upgraded.next_run_at, upgraded.last_scheduled_at) == (
            T0,
            T0 - dt.timedelta(days=1),
        )
        assert new.get_model("scheduler", "Execution").objects.get().state == "running"
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
