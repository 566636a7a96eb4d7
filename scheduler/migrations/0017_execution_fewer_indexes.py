# Executions lose the single-column indexes of their foreign keys: each one
# costs a write on every insert and every delete (retention deletes runs by
# the million), and other indexes serve their lookups. job_id: those that
# start with it (exec_job_history, exec_job_newest, execution_once);
# runner_id: exec_runner_state. Nearly every run has no upstream, so the
# index of upstream_id gives way to a partial one of the chained runs,
# exec_upstream, built first: a pruned run's chained runs and the database's
# foreign key check on a run's delete never go without an index (without
# one, SQLite took 21 s to delete 1,000 runs).
#
# Only the indexes change: an AlterField of db_index makes SQLite copy the
# whole table (slow, and twice its disk space, at millions of runs). On
# PostgreSQL the index is built and the old ones dropped CONCURRENTLY, so
# the web process and the loop keep writing (atomic = False). An interrupted
# migration leaves exec_upstream behind (INVALID on PostgreSQL when its build
# was cut short) and perhaps some of the old indexes: drop exec_upstream
# (DROP INDEX CONCURRENTLY exec_upstream; on SQLite DROP INDEX exec_upstream)
# and migrate again, which drops whichever old index is still there.

from importlib import import_module

import django.db.models.deletion
from django.db import migrations, models

AddIndexConcurrently = import_module(
    "scheduler.migrations.0005_execution_retention_index"
).AddIndexConcurrently

# The foreign keys whose own index goes.
FIELDS = ["job", "runner", "upstream"]


def concurrently(schema_editor):
    return {"concurrently": True} if schema_editor.connection.vendor == "postgresql" else {}


def drop_field_indexes(apps, schema_editor):
    """Drop the index each field's db_index made, as AlterField would: the
    single-column b-tree index on its column that is none of the model's
    named indexes and constraints (exec_upstream, exec_job_pending and
    execution_singleton_live are on one of these columns alone too)."""
    Execution = apps.get_model("scheduler", "Execution")
    named = {index.name for index in Execution._meta.indexes}
    named |= {constraint.name for constraint in Execution._meta.constraints}
    for name in FIELDS:
        column = Execution._meta.get_field(name).column
        for index in schema_editor._constraint_names(
            Execution, [column], index=True, type_=models.Index.suffix, exclude=named
        ):
            schema_editor.execute(
                schema_editor._delete_index_sql(Execution, index, **concurrently(schema_editor))
            )


def create_field_indexes(apps, schema_editor):
    """The indexes db_index makes, under their names of before."""
    Execution = apps.get_model("scheduler", "Execution")
    for name in FIELDS:
        field = Execution._meta.get_field(name)
        schema_editor.execute(
            schema_editor._create_index_sql(
                Execution, fields=[field], **concurrently(schema_editor)
            )
        )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("scheduler", "0016_run_on_all"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="execution",
            index=models.Index(
                condition=models.Q(upstream__isnull=False),
                fields=["upstream"],
                name="exec_upstream",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunPython(drop_field_indexes, create_field_indexes),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="execution",
                    name="job",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="executions",
                        to="scheduler.job",
                    ),
                ),
                migrations.AlterField(
                    model_name="execution",
                    name="runner",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="executions",
                        to="runners.runner",
                    ),
                ),
                migrations.AlterField(
                    model_name="execution",
                    name="upstream",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        help_text="The run whose end started this one (trigger chain).",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="scheduler.execution",
                    ),
                ),
            ],
        ),
    ]
