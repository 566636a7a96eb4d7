"""scheduler 0021 on a database holding rows: jobs require nothing (policy
wait, an hour's timeout), and a run queued behind its job's overlap policy
before the upgrade is no run waiting for requirements: its turn comes as
before."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from scheduler.models import Execution, Job
from scheduler.runs import overlap, requirements
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0020_job_schedules_at_bounds_max_runs")]
AFTER = [("scheduler", "0021_job_requires")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_stored_jobs_require_nothing_and_their_queued_runs_keep_their_turn():
    old = migrate(BEFORE)
    job = old.get_model("scheduler", "Job").objects.create(
        name="report", schedule="*/5 * * * *", command="true", overlap="queue"
    )
    queued = old.get_model("scheduler", "Execution").objects.create(
        job=job, scheduled_for=T0, attempt=1, run_after=T0, created_at=T0, state="queued"
    )
    try:
        migrate(AFTER)
        migrate(everything())
        upgraded = Job.objects.get(name="report")
        assert (upgraded.requires, upgraded.requires_policy, upgraded.requires_timeout) == (
            [],
            "wait",
            3600,
        )
        upgraded.full_clean()  # a stored job is still valid as it is
        assert Execution.objects.get(pk=queued.pk).requires_until is None
        assert not requirements.anything_waits()
        assert overlap.promote_waiting(T0) == 1
    finally:
        migrate(everything())
