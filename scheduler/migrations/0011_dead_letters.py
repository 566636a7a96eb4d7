# Dead letters (scheduler.triage.dead_letters): a table of their own beside the
# executions, and the "replay" trigger of the executions a replay creates.
#
# A new table and a choice added: nothing of an existing row changes. Runs
# that gave up before the upgrade are not filed: dead letters start with it
# (those runs stay retryable from their execution).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0010_execution_outcome_indexes'),
    ]

    operations = [
        migrations.AlterField(
            model_name='execution',
            name='trigger',
            field=models.CharField(choices=[('schedule', 'schedule'), ('manual', 'manual'), ('retry', 'retry'), ('catch_up', 'catch-up'), ('backfill', 'backfill'), ('replay', 'replay of a dead letter')], default='schedule', max_length=10),
        ),
        migrations.CreateModel(
            name='DeadLetter',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('reason', models.CharField(choices=[('failed', 'failed'), ('timed_out', 'timed out'), ('lost', 'lost')], max_length=10)),
                ('detail', models.TextField(blank=True, help_text="The attempt's error, exit code or why it was lost.")),
                ('log_tail', models.TextField(blank=True, help_text="The last lines of the attempt's log.")),
                ('landed_at', models.DateTimeField()),
                ('replayed_at', models.DateTimeField(blank=True, null=True)),
                ('discarded_at', models.DateTimeField(blank=True, null=True)),
                ('execution', models.OneToOneField(help_text='The last attempt, which gave up.', on_delete=django.db.models.deletion.CASCADE, related_name='dead_letter', to='scheduler.execution')),
                ('replayed_execution', models.ForeignKey(blank=True, help_text='The execution its replay created.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='scheduler.execution')),
            ],
            options={
                'ordering': ['-id'],
                'permissions': [('replay_deadletter', 'Can replay a dead letter'), ('discard_deadletter', 'Can discard a dead letter')],
                'indexes': [models.Index(condition=models.Q(('discarded_at__isnull', True), ('replayed_at__isnull', True)), fields=['-id'], name='deadletter_open')],
            },
        ),
    ]
