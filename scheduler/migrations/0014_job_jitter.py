# Jitter: a fixed per-job delay of each instant (docs/design.md §10). Existing
# jobs have none: their instants do not move.

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0013_concurrency'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='jitter',
            field=models.PositiveIntegerField(blank=True, help_text="Seconds: every instant of the job moves later by a fixed offset below this, derived from the job's name (spreads jobs due together). Empty: none.", null=True, validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(86400)]),
        ),
    ]
