# Written by hand (docs/design.md §14): a job's further schedules, one-shot
# instants, bounds and run limit. Every column has a database default or is
# nullable, so a job stored before keeps its behaviour: no further schedule,
# no instant, no bound, no limit.

import django.core.validators
from django.db import migrations, models

import scheduler.jobs.models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0019_job_stdin_run_as_run_on_register"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="schedules",
            field=models.JSONField(
                blank=True,
                db_default=[],
                default=scheduler.jobs.models.default_labels,
                help_text='More schedules, beside or instead of the schedule: each a schedule as above, or {"cron": ..., "timezone": ...} on a clock of its own. The job fires at each instant any of them gives, once.',
                validators=[scheduler.jobs.models.validate_schedules],
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="at",
            field=models.JSONField(
                blank=True,
                db_default=[],
                default=scheduler.jobs.models.default_labels,
                help_text="One-shot instants, ISO 8601 with an offset (2026-06-01T09:00:00+02:00).",
                validators=[scheduler.jobs.models.validate_at],
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="not_before",
            field=models.DateTimeField(
                blank=True, help_text="No occurrence before this instant.", null=True
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="not_after",
            field=models.DateTimeField(
                blank=True, help_text="No occurrence after this instant.", null=True
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="max_runs",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="After this many scheduled occurrences the job completes: it disables itself. Raise it (or empty it) to run the job again. Empty: no limit.",
                null=True,
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(100000),
                ],
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="scheduled_runs",
            field=models.PositiveIntegerField(
                db_default=0,
                default=0,
                help_text="Scheduled occurrences counted towards max_runs since it was set.",
            ),
        ),
        migrations.AlterField(
            model_name="job",
            name="schedule",
            field=models.CharField(
                blank=True,
                help_text='5-field cron ("30 2 * * *"), a macro (@daily) or "@every 5m". Empty only with more schedules or one-shot instants, or with run on register: the job then runs when a runner starts and when triggered.',
                max_length=200,
            ),
        ),
    ]
