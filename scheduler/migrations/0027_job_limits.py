"""Job limits (docs/design.md §15): `max_output` and `on_max_output`,
`max_memory`, `max_cpu_seconds` and `success_exit_codes`. Every stored job
gets none (its log cut at the server's CRONIQ_LOG_LIMIT as before, no
memory or CPU limit, exit code 0 alone a success), set by the database's
defaults: nothing else changes, and no job needs more of its runners."""

import django.core.validators
from django.db import migrations, models

import scheduler.jobs.models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0026_execution_traceparent"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="max_output",
            field=models.PositiveBigIntegerField(
                blank=True,
                null=True,
                validators=[
                    django.core.validators.MinValueValidator(1024),
                    django.core.validators.MaxValueValidator(1073741824),
                ],
                help_text="Bytes of output a run's log keeps; past it the log keeps its head "
                "and tail (or the run fails, with on_max_output fail). Empty: the server's log "
                "limit (CRONIQ_LOG_LIMIT, 1 MiB unless changed).",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="on_max_output",
            field=models.CharField(
                choices=[
                    ("truncate", "truncate: keep the head and the tail, say how much was cut"),
                    ("fail", "fail: end and fail the run"),
                ],
                db_default="truncate",
                default="truncate",
                max_length=8,
                help_text="Output past max_output: truncate the log (keep its head and tail), "
                "or end the run and fail it.",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="max_memory",
            field=models.PositiveBigIntegerField(
                blank=True,
                null=True,
                validators=[
                    django.core.validators.MinValueValidator(1048576),
                    django.core.validators.MaxValueValidator(1099511627776),
                ],
                help_text="Bytes of memory the command's processes may use together (a cgroup "
                "where the runner can make one, else a limit per process); past it the run "
                "fails. Empty: no limit.",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="max_cpu_seconds",
            field=models.PositiveIntegerField(
                blank=True,
                null=True,
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(2147483647),
                ],
                help_text="Seconds of CPU the command's processes may use together; past them "
                "the run fails. Empty: no limit.",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="success_exit_codes",
            field=models.JSONField(
                blank=True,
                db_default=[],
                default=scheduler.jobs.models.default_labels,
                validators=[scheduler.jobs.models.validate_exit_codes],
                help_text="The exit codes that make a run succeed, e.g. [0, 3]. Empty: 0 alone.",
            ),
        ),
    ]
