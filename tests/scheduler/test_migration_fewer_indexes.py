"""0017 drops the single-column indexes of an execution's job, runner and
upstream from a database holding wave-1 rows and keeps every row; a partial
index, exec_upstream, finds the chained runs of a pruned run and serves the
database's foreign key check when a run is deleted; migrating back makes the
three indexes again."""

import datetime as dt

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from tests.migrations import migrate

# Migrations run outside a test transaction (on PostgreSQL the indexes are
# built and dropped CONCURRENTLY, which refuses to run inside one).
pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0016_run_on_all")]
AFTER = [("scheduler", "0017_execution_fewer_indexes")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
TABLE = "scheduler_execution"
# The names db_index=True gave them.
OLD_INDEXES = {
    "scheduler_execution_job_id_1397446c",
    "scheduler_execution_runner_id_ecfb2aba",
    "scheduler_execution_upstream_id_ef4fc07a",
}


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def execution_indexes():
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, TABLE)
    return {name for name, info in constraints.items() if info["index"]}


def rows(apps):
    """Every row the migration must keep, field by field."""
    models = ("scheduler.Job", "runners.Runner", "scheduler.Execution", "scheduler.LogChunk")
    return {name: list(apps.get_model(name).objects.order_by("pk").values()) for name in models}


def plan(sql, params):
    """The planner's plan of `sql`, a line a step. PostgreSQL: with
    sequential scans off, so a table of a few rows shows the index it can use."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            return [row[-1] for row in cursor.fetchall()]
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        return [row[0] for row in cursor.fetchall()]


def foreign_key_check_plan(parent):
    """How the database looks for the runs chained to `parent` when it is
    deleted. SQLite plans its check inside the DELETE; PostgreSQL runs this
    query, prepared once with $1 (a generic plan), in its foreign key trigger."""
    if connection.vendor == "sqlite":
        return plan(f"DELETE FROM {TABLE} WHERE id = %s", [parent])
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(
            f"PREPARE fk_check(bigint) AS SELECT 1 FROM ONLY {TABLE} x"
            " WHERE upstream_id = $1 FOR KEY SHARE OF x"
        )
        try:
            cursor.execute("EXPLAIN EXECUTE fk_check(%s)", [parent])
            return [row[0] for row in cursor.fetchall()]
        finally:
            cursor.execute("DEALLOCATE fk_check")


def delete(pk):
    """Delete an execution as retention does: plain SQL, no cascade."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE} WHERE id = %s", [pk])


def test_the_three_indexes_go_and_come_back_and_every_row_is_kept():
    old = migrate(BEFORE)
    Job = old.get_model("scheduler", "Job")
    Execution = old.get_model("scheduler", "Execution")
    report = Job.objects.create(
        name="report", schedule="0 * * * *", command="true", on_success=["publish"]
    )
    publish = Job.objects.create(name="publish", schedule="@daily", command="true")
    runner = old.get_model("runners", "Runner").objects.create(
        name="worker-1", session="s1", registered_at=T0, last_seen_at=T0
    )
    ran = Execution.objects.create(
        job=report, scheduled_for=T0, run_after=T0, created_at=T0, state="succeeded",
        runner=runner, claimed_at=T0, finished_at=T0 + dt.timedelta(seconds=5), exit_code=0,
    )  # fmt: skip
    Execution.objects.create(
        job=publish, scheduled_for=T0, run_after=T0, created_at=T0, trigger="chain",
        upstream=ran,
    )  # fmt: skip
    Execution.objects.create(
        job=report, scheduled_for=T0 - dt.timedelta(hours=1), run_after=T0, created_at=T0,
        state="failed", exit_code=2, finished_at=T0,
    )  # fmt: skip
    old.get_model("scheduler", "LogChunk").objects.create(execution=ran, seq=0, data="ok\n")
    before = rows(old)
    assert execution_indexes() >= OLD_INDEXES
    try:
        new = migrate(AFTER)
        indexes = execution_indexes()
        assert not indexes & OLD_INDEXES
        assert "exec_upstream" in indexes
        assert rows(new) == before

        old = migrate(BEFORE)
        indexes = execution_indexes()
        assert indexes >= OLD_INDEXES
        assert "exec_upstream" not in indexes
        assert rows(old) == before

        new = migrate(AFTER)
        assert not execution_indexes() & OLD_INDEXES
        assert rows(new) == before
    finally:
        migrate(everything())


def test_chained_runs_are_found_and_checked_through_the_upstream_index():
    apps = migrate(AFTER)
    job = apps.get_model("scheduler", "Job").objects.create(
        name="report", schedule="0 * * * *", command="true"
    )
    Execution = apps.get_model("scheduler", "Execution")
    finished = {"run_after": T0, "created_at": T0, "state": "succeeded", "finished_at": T0}
    parent = Execution.objects.create(job=job, scheduled_for=T0, **finished)
    other = Execution.objects.create(job=job, scheduled_for=T0 + dt.timedelta(hours=1), **finished)
    chained = Execution.objects.create(
        job=job, scheduled_for=T0, attempt=2, trigger="chain", run_after=T0, created_at=T0,
        upstream=parent,
    )  # fmt: skip
    try:
        # Retention's look for a batch's chained runs (scheduler.housekeeping.rows_by_id).
        found = plan(f"SELECT id FROM {TABLE} WHERE upstream_id IN (%s, %s)", [parent.pk, other.pk])
        assert any("exec_upstream" in line for line in found), found
        checked = foreign_key_check_plan(parent.pk)
        assert any("exec_upstream" in line for line in checked), checked
        assert not any(line.startswith(f"SCAN {TABLE}") for line in checked), checked

        # The check finds the chained run: its upstream cannot be deleted...
        with pytest.raises(IntegrityError):
            delete(parent.pk)
        # ...until it lets go of it.
        Execution.objects.filter(pk=chained.pk).update(upstream=None)
        delete(parent.pk)
        assert set(Execution.objects.values_list("pk", flat=True)) == {other.pk, chained.pk}
    finally:
        migrate(everything())
