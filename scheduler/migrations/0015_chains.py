# Chains (docs/design.md §10): jobs a run starts when it settles, and the run
# that started each chained one. Existing jobs chain nothing.

import django.db.models.deletion
import scheduler.jobs.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0014_job_jitter'),
    ]

    operations = [
        migrations.AddField(
            model_name='execution',
            name='upstream',
            field=models.ForeignKey(blank=True, help_text='The run whose end started this one (trigger chain).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='scheduler.execution'),
        ),
        migrations.AddField(
            model_name='job',
            name='on_failure',
            field=models.JSONField(blank=True, db_default=[], default=scheduler.jobs.models.default_labels, help_text='Names of jobs to run when a run of this job fails for good (after its retries).'),
        ),
        migrations.AddField(
            model_name='job',
            name='on_success',
            field=models.JSONField(blank=True, db_default=[], default=scheduler.jobs.models.default_labels, help_text='Names of jobs to run when a run of this job succeeds.'),
        ),
        migrations.AlterField(
            model_name='execution',
            name='trigger',
            field=models.CharField(choices=[('schedule', 'schedule'), ('manual', 'manual'), ('retry', 'retry'), ('catch_up', 'catch-up'), ('backfill', 'backfill'), ('replay', 'replay of a dead letter'), ('chain', "chain: an upstream job's run settled")], default='schedule', max_length=10),
        ),
    ]
