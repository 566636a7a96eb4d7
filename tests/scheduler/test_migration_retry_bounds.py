"""0018 bounds a job's retry policy (validators only): a job stored before
it with values over the bounds keeps them, and its failed run still
settles, its retry waiting at most a day."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from scheduler.models import Execution, Job
from scheduler.runs import lifecycle
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0017_execution_fewer_indexes")]
AFTER = [("scheduler", "0018_job_retry_bounds")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_a_job_over_the_bounds_keeps_its_values_and_its_run_settles():
    old = migrate(BEFORE)
    job = old.get_model("scheduler", "Job").objects.create(
        name="report", schedule="*/5 * * * *", command="true", retries=2**31 - 1,
        retry_backoff=2**31 - 1,
    )  # fmt: skip
    old.get_model("scheduler", "Execution").objects.create(
        job=job, scheduled_for=T0, attempt=1, run_after=T0, created_at=T0, state="running",
    )  # fmt: skip
    try:
        migrate(AFTER)
        migrate(everything())
        upgraded = Job.objects.get(name="report")
        assert (upgraded.retries, upgraded.retry_backoff) == (2**31 - 1, 2**31 - 1)

        run = Execution.objects.get(job=upgraded)
        lifecycle.settle(run, Execution.FAILED, T0, exit_code=1)
        retry = Execution.objects.get(job=upgraded, attempt=2)
        assert retry.run_after == T0 + dt.timedelta(days=1)
    finally:
        migrate(everything())
