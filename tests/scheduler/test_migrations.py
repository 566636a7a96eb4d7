"""Upgrading a database that holds rows: the retention indexes migration."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# Migrations run outside a test transaction (on PostgreSQL the indexes are
# built CONCURRENTLY, which refuses to run inside one).
pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0002_claim_order_index")]
RETENTION = [("scheduler", "0005_execution_retention_index")]
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def indexes(table):
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return {name for name, info in found.items() if info["index"]}


def test_the_retention_indexes_are_added_to_a_database_holding_rows():
    apps = migrate(BEFORE)
    assert "exec_finished" not in indexes("scheduler_execution")
    job = apps.get_model("scheduler", "Job").objects.create(
        name="nightly", schedule="0 3 * * *", command="true"
    )
    execution = apps.get_model("scheduler", "Execution").objects.create(
        job=job, scheduled_for=T0, run_after=T0, created_at=T0, state="succeeded", finished_at=T0
    )
    apps.get_model("scheduler", "LogChunk").objects.create(execution=execution, seq=0, data="ok\n")

    apps = migrate(RETENTION)

    assert "exec_finished" in indexes("scheduler_execution")
    assert "logchunk_created" in indexes("scheduler_logchunk")
    kept = apps.get_model("scheduler", "Execution").objects.get()
    assert (kept.pk, kept.state, kept.finished_at) == (execution.pk, "succeeded", T0)
    assert apps.get_model("scheduler", "LogChunk").objects.get().data == "ok\n"
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
