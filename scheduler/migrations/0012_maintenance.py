# Maintenance mode (the switch and windows) and two job fields: what a job
# does inside a maintenance (existing jobs: skip, the database default) and
# pause_after_failures (existing jobs: none, they never pause themselves).

import django.core.validators
import scheduler.runs.maintenance_models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0011_dead_letters'),
    ]

    operations = [
        migrations.CreateModel(
            name='MaintenanceSwitch',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('on', models.BooleanField(default=False, help_text='While on, runners claim no new work and occurrences are skipped.')),
                ('reason', models.CharField(blank=True, help_text='Why, shown in the banner.', max_length=200)),
                ('changed_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'verbose_name': 'maintenance switch',
                'verbose_name_plural': 'maintenance switch',
            },
        ),
        migrations.AddField(
            model_name='job',
            name='maintenance',
            field=models.CharField(choices=[('skip', 'skip occurrences inside a maintenance'), ('defer', 'run once when the maintenance ends')], db_default='skip', default='skip', help_text='An occurrence inside a maintenance: skipped, or deferred to one run at its end.', max_length=10),
        ),
        migrations.AddField(
            model_name='job',
            name='pause_after_failures',
            field=models.PositiveIntegerField(blank=True, help_text='Pause the job after this many runs in a row failed for good (after their retries). Empty: never.', null=True, validators=[django.core.validators.MinValueValidator(1)]),
        ),
        migrations.CreateModel(
            name='MaintenanceWindow',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('start', models.DateTimeField(help_text='First instant of the window.')),
                ('end', models.DateTimeField(help_text='End of the window, exclusive.')),
                ('labels', models.JSONField(blank=True, default=scheduler.runs.maintenance_models.no_labels, help_text='Only jobs carrying one of these labels; empty: every job.')),
                ('reason', models.CharField(blank=True, help_text='Why, shown in the banner.', max_length=200)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['start', 'pk'],
                'indexes': [models.Index(fields=['end'], name='maintenance_window_end')],
                'constraints': [models.CheckConstraint(condition=models.Q(('end__gt', models.F('start'))), name='maintenance_window_ordered')],
            },
        ),
    ]
