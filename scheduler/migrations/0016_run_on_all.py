# run_on: all (docs/design.md §10): one execution per matching runner, each
# pinned to its runner by name. Existing jobs run on one runner and existing
# executions are pinned to none (''), so invariant 1 keeps its meaning for
# them: one row per (job, instant, attempt).

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runners', '0003_runner_drained'),
        ('scheduler', '0015_chains'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='execution',
            name='execution_once',
        ),
        migrations.AddField(
            model_name='execution',
            name='pinned_to',
            field=models.CharField(blank=True, db_default='', default='', help_text='A run of a run-on-all job: the name of the one runner that may claim it.', max_length=200),
        ),
        migrations.AddField(
            model_name='job',
            name='run_on',
            field=models.CharField(choices=[('one', 'one matching runner'), ('all', 'every matching runner online at the instant')], db_default='one', default='one', help_text='Run each occurrence on one matching runner, or on every matching runner online at its instant (one execution each).', max_length=3),
        ),
        migrations.AddField(
            model_name='job',
            name='stagger',
            field=models.PositiveIntegerField(blank=True, help_text="With run on all: seconds between the runners' starts, in the order of their names. Empty: all at once.", null=True, validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(86400)]),
        ),
        migrations.AddConstraint(
            model_name='execution',
            constraint=models.UniqueConstraint(fields=('job', 'scheduled_for', 'attempt', 'pinned_to'), name='execution_once'),
        ),
    ]
