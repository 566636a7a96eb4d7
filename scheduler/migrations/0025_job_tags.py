"""Job tags (docs/design.md §17): `tags`, a list of short slugs operators
group jobs by. Every stored job gets none (`[]`, the database's default):
nothing else changes."""

from django.db import migrations, models

import scheduler.jobs.models
import scheduler.jobs.tags


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0024_job_container"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="tags",
            field=models.JSONField(
                blank=True,
                db_default=[],
                default=scheduler.jobs.models.default_labels,
                help_text="Short slugs to find and act on jobs together, e.g. billing, nightly.",
                validators=[scheduler.jobs.tags.validate_tags],
            ),
        ),
    ]
