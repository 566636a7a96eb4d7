# Manual triggers and backfills (docs/design.md §8): declared job parameters,
# env overrides, idempotency keys, and the queued state of a singleton backfill.

import django.db.models.deletion
import scheduler.jobs.models
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0007_job_management"),
    ]

    operations = [
        migrations.CreateModel(
            name="TriggerKey",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", models.CharField(max_length=200)),
                ("created_at", models.DateTimeField()),
            ],
            options={
                "default_permissions": (),
            },
        ),
        migrations.AddField(
            model_name="execution",
            name="env",
            field=models.JSONField(
                blank=True,
                db_default={},
                default=dict,
                help_text="Set by a manual trigger: added to the job's env for this run.",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="parameters",
            field=models.JSONField(
                blank=True,
                db_default=[],
                default=scheduler.jobs.models.default_labels,
                help_text="Names of environment variables a manual trigger may set.",
                validators=[scheduler.jobs.models.validate_parameters],
            ),
        ),
        migrations.AlterField(
            model_name="execution",
            name="state",
            field=models.CharField(
                choices=[
                    ("queued", "queued"),
                    ("pending", "pending"),
                    ("running", "running"),
                    ("succeeded", "succeeded"),
                    ("failed", "failed"),
                    ("timed_out", "timed out"),
                    ("lost", "lost"),
                    ("cancelled", "cancelled"),
                    ("skipped", "skipped"),
                ],
                default="pending",
                max_length=10,
            ),
        ),
        migrations.AlterField(
            model_name="execution",
            name="trigger",
            field=models.CharField(
                choices=[
                    ("schedule", "schedule"),
                    ("manual", "manual"),
                    ("retry", "retry"),
                    ("catch_up", "catch-up"),
                    ("backfill", "backfill"),
                ],
                default="schedule",
                max_length=10,
            ),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(fields=["job", "-id"], name="exec_job_newest"),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("state", "pending")), fields=["job"], name="exec_job_pending"
            ),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("state", "queued")),
                fields=["job", "scheduled_for"],
                name="exec_job_queued",
            ),
        ),
        migrations.AddField(
            model_name="triggerkey",
            name="execution",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="scheduler.execution",
            ),
        ),
        migrations.AddField(
            model_name="triggerkey",
            name="job",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="scheduler.job"
            ),
        ),
        migrations.AddConstraint(
            model_name="triggerkey",
            constraint=models.UniqueConstraint(fields=("job", "key"), name="triggerkey_once"),
        ),
    ]
