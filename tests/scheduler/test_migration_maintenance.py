"""0012 adds maintenance mode to a database holding jobs and executions:
existing jobs skip occurrences inside a maintenance and never pause
themselves; the switch starts off and no window exists."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from scheduler.firing import ticks
from scheduler.models import Execution, Job
from scheduler.runs import maintenance
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0011_dead_letters")]
AFTER = [("scheduler", "0012_maintenance")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def test_existing_jobs_skip_inside_a_maintenance_and_never_pause_themselves():
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
        assert (upgraded.maintenance, upgraded.pause_after_failures) == (Job.SKIP, None)
        assert not maintenance.load(T0).active(T0)
        # Firing reads the fields of the later migrations too.
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
        upgraded = Job.objects.get(name="report")
        Job.objects.filter(pk=upgraded.pk).update(next_run_at=T0 + dt.timedelta(minutes=5))
        maintenance.add_window(T0, T0 + dt.timedelta(hours=1), T0, ("user", "root"))
        ticks.trigger_due(T0 + dt.timedelta(minutes=5))
        fired = Execution.objects.get(job=upgraded, scheduled_for=T0 + dt.timedelta(minutes=5))
        assert fired.state == Execution.SKIPPED
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
