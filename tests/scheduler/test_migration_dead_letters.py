"""0011 upgrades a database that holds jobs, runs and logs: they stay as
they were, no dead letter is made up for them, a run that gives up after
the upgrade lands, and the Croniq groups get the dead letters' permissions."""

import datetime as dt

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from scheduler.models import Execution
from scheduler.runs import lifecycle
from scheduler.triage.dead_letters import DeadLetter
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0010_execution_outcome_indexes"), ("dashboard", "0003_api_key_groups")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_wave_one_rows_survive_and_new_failures_land():
    old = migrate(BEFORE)
    Job = old.get_model("scheduler", "Job")
    OldExecution = old.get_model("scheduler", "Execution")
    job = Job.objects.create(name="report", schedule="0 * * * *", command="true", retries=0)
    failed = OldExecution.objects.create(
        job=job, scheduled_for=T0, run_after=T0, created_at=T0, state="failed", exit_code=1
    )
    running = OldExecution.objects.create(
        job=job, scheduled_for=T0 + dt.timedelta(hours=1), run_after=T0, created_at=T0,
        state="running", lease=1,
    )  # fmt: skip
    old.get_model("scheduler", "LogChunk").objects.create(execution=running, seq=0, data="hi\n")
    try:
        migrate(everything())
        assert not DeadLetter.objects.exists()
        assert Execution.objects.get(pk=failed.pk).state == "failed"
        execution = Execution.objects.get(pk=running.pk)
        lifecycle.settle(execution, Execution.FAILED, T0, exit_code=1)
        landed = DeadLetter.objects.get()
        assert (landed.execution_id, landed.log_tail) == (running.pk, "hi")
        operators = Group.objects.get(name="Croniq operators")
        codenames = set(operators.permissions.values_list("codename", flat=True))
        assert {"view_deadletter", "replay_deadletter", "discard_deadletter"} <= codenames
        viewers = Group.objects.get(name="Croniq viewers")
        assert not viewers.permissions.filter(codename="replay_deadletter").exists()
    finally:
        migrate(everything())
