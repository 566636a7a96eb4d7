# Written by hand (docs/design.md §14): a job's requirements (the jobs that
# must have succeeded shortly before an occurrence runs, the policy when
# they have not, how long a run waits) and a waiting run's deadline. Every
# job column has a database default, so a job stored before requires
# nothing; an existing execution waits for nothing (NULL). No index: the
# waiting runs are read through exec_job_queued, among the few queued ones.

import django.core.validators
from django.db import migrations, models

import scheduler.jobs.models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0020_job_schedules_at_bounds_max_runs"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="requires",
            field=models.JSONField(
                blank=True,
                db_default=[],
                default=scheduler.jobs.models.default_labels,
                help_text='Jobs that must each have a run that succeeded within a window before an occurrence\'s instant: [{"job": name, "succeeded_within": seconds}].',
                validators=[scheduler.jobs.models.validate_requires],
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="requires_policy",
            field=models.CharField(
                choices=[
                    (
                        "wait",
                        "wait: hold the run until they are met, at most the timeout, then skip it",
                    ),
                    ("skip", "skip the occurrence"),
                    ("fail", "fail the run (a dead letter, notifications)"),
                ],
                db_default="wait",
                default="wait",
                help_text="An occurrence whose requirements are unmet at its instant: wait for them, skip it, or fail it.",
                max_length=4,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="requires_timeout",
            field=models.PositiveIntegerField(
                db_default=3600,
                default=3600,
                help_text="With requires_policy wait: seconds a run waits for its requirements before it is skipped.",
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(
                        604800, "at most 604800 seconds, a week (got %(show_value)s)"
                    ),
                ],
            ),
        ),
        migrations.AddField(
            model_name="execution",
            name="requires_until",
            field=models.DateTimeField(
                blank=True,
                help_text="Queued until its job's requirements are met, at most until then (requires_policy wait); empty otherwise.",
                null=True,
            ),
        ),
    ]
