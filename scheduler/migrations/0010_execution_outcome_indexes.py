# The dashboard's outcome indexes (dashboard.queries): settled executions by
# state and time, overall and per job.
#
# Built CONCURRENTLY on PostgreSQL like 0005 (see there for an interrupted
# build); SQLite builds them with a plain CREATE INDEX.

from importlib import import_module

from django.db import migrations, models

AddIndexConcurrently = import_module(
    "scheduler.migrations.0005_execution_retention_index"
).AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("scheduler", "0009_job_managed_source"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="execution",
            index=models.Index(
                condition=models.Q(state__in=["succeeded", "failed", "timed_out", "lost"]),
                fields=["state", "finished_at", "job"],
                name="exec_state_finished",
            ),
        ),
        AddIndexConcurrently(
            model_name="execution",
            index=models.Index(
                condition=models.Q(state__in=["succeeded", "failed", "timed_out", "lost"]),
                fields=["job", "state", "finished_at"],
                name="exec_job_state_finished",
            ),
        ),
    ]
