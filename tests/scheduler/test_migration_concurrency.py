"""0013 adds overlap policies and concurrency groups to a database holding
jobs and executions: a wave-1 singleton job becomes overlap skip and keeps
skipping while its run is live; every other job allows overlaps and is in
no group."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from scheduler.firing import ticks
from scheduler.models import Execution, Job
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0012_maintenance")]
AFTER = [("scheduler", "0013_concurrency")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def test_singleton_jobs_skip_and_the_others_allow_overlaps():
    old = migrate(BEFORE)
    OldJob = old.get_model("scheduler", "Job")
    OldExecution = old.get_model("scheduler", "Execution")
    single = OldJob.objects.create(
        name="nightly", schedule="*/5 * * * *", command="true", singleton=True, next_run_at=T0
    )
    OldJob.objects.create(name="report", schedule="*/5 * * * *", command="true", next_run_at=T0)
    OldExecution.objects.create(
        job=single, scheduled_for=T0, run_after=T0, created_at=T0, state="running", singleton=True
    )
    try:
        new = migrate(AFTER)
        NewJob = new.get_model("scheduler", "Job")
        rows = dict(NewJob.objects.values_list("name", "overlap"))
        assert rows == {"nightly": "skip", "report": "allow"}
        assert not NewJob.objects.filter(concurrency_group__isnull=False).exists()
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
        Job.objects.update(next_run_at=T0 + dt.timedelta(minutes=5))
        ticks.trigger_due(T0 + dt.timedelta(minutes=5))
        later = Execution.objects.filter(scheduled_for=T0 + dt.timedelta(minutes=5))
        assert later.get(job__name="nightly").state == Execution.SKIPPED
        assert later.get(job__name="report").state == Execution.PENDING
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
