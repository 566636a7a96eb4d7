"""Trace contexts (docs/design.md §15): each execution's `traceparent`,
drawn when it is created. Executions stored before get none (the
database's default, ""): their assignments carry no traceparent and export
no spans; nothing else changes."""

from django.db import migrations, models

import core.tracing


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0025_job_tags"),
    ]

    operations = [
        migrations.AddField(
            model_name="execution",
            name="traceparent",
            field=models.CharField(
                blank=True,
                db_default="",
                default=core.tracing.new_traceparent,
                help_text="The run's W3C trace context: the job's TRACEPARENT.",
                max_length=55,
            ),
        ),
    ]
