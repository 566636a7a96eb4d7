"""0014 and 0015 add jitter and chains to a database holding jobs and
executions: existing jobs keep their instants and chain nothing, existing
runs name no upstream, and the loop fires them as before."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from scheduler.firing import ticks
from scheduler.models import Execution, Job
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0013_concurrency")]
AFTER = [("scheduler", "0015_chains")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def test_existing_jobs_keep_their_instants_and_chain_nothing():
    old = migrate(BEFORE)
    OldJob = old.get_model("scheduler", "Job")
    OldExecution = old.get_model("scheduler", "Execution")
    job = OldJob.objects.create(
        name="report", schedule="*/5 * * * *", command="true", next_run_at=T0
    )
    OldExecution.objects.create(
        job=job, scheduled_for=T0, run_after=T0, created_at=T0, state="succeeded"
    )
    try:
        new = migrate(AFTER)
        upgraded = new.get_model("scheduler", "Job").objects.get(name="report")
        assert (upgraded.jitter, upgraded.on_success, upgraded.on_failure) == (None, [], [])
        run = new.get_model("scheduler", "Execution").objects.get()
        assert run.upstream_id is None
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
        job = Job.objects.get(name="report")
        assert job.next_fire_after(T0) == T0 + dt.timedelta(minutes=5)
        Job.objects.update(next_run_at=T0 + dt.timedelta(minutes=5))
        ticks.trigger_due(T0 + dt.timedelta(minutes=5))
        assert Execution.objects.filter(state=Execution.PENDING).count() == 1
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
