# Overlap policies and concurrency groups (docs/design.md §10). A wave-1
# singleton job keeps its behaviour: its overlap becomes `skip`.

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


def singletons_skip(apps, schema_editor):
    Job = apps.get_model("scheduler", "Job")
    Job.objects.filter(singleton=True).update(overlap="skip")


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0012_maintenance'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='max_concurrent',
            field=models.PositiveIntegerField(blank=True, help_text='With overlap queue: at most this many runs at once (empty: 1).', null=True, validators=[django.core.validators.MinValueValidator(1)]),
        ),
        migrations.AddField(
            model_name='job',
            name='max_queue',
            field=models.PositiveIntegerField(blank=True, help_text='With overlap queue: at most this many occurrences wait; later ones are skipped (empty: no limit).', null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='overlap',
            field=models.CharField(choices=[('allow', 'allow: run alongside'), ('skip', 'skip: never two at once, skip the newcomer'), ('queue', 'queue: at most max_concurrent at once, the rest wait in order'), ('replace', 'replace: cancel the running one, then start')], db_default='allow', default='allow', help_text='An occurrence due while a run of the job is live: run alongside, skip it, queue it, or replace the live run.', max_length=10),
        ),
        migrations.AlterField(
            model_name='job',
            name='singleton',
            field=models.BooleanField(default=False, help_text='Never run two executions of this job at once (the overlap policy skip).'),
        ),
        migrations.CreateModel(
            name='ConcurrencyGroup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.SlugField(max_length=100, unique=True)),
                ('max_concurrent', models.PositiveIntegerField(help_text="At most this many executions of the group's jobs run at once.", validators=[django.core.validators.MinValueValidator(1)])),
                ('description', models.TextField(blank=True)),
                ('managed_by', models.CharField(choices=[('apply', 'apply (jobs as code)'), ('api', 'the management API'), ('admin', 'the admin')], default='admin', help_text='apply updates and prunes only what it manages; saving an apply-managed row here adopts it (apply no longer prunes it).', max_length=10, verbose_name='managed by')),
                ('managed_source', models.CharField(blank=True, default='', help_text="The apply source (a file's stem, or apply --source) that manages this row: apply --prune of that source alone deletes it.", max_length=100, verbose_name='managed by file')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['name'],
                'constraints': [models.CheckConstraint(condition=models.Q(('max_concurrent__gte', 1)), name='group_budget_positive')],
            },
        ),
        migrations.AddField(
            model_name='job',
            name='concurrency_group',
            field=models.ForeignKey(blank=True, help_text='A budget of running executions this job shares with others.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='jobs', to='scheduler.concurrencygroup'),
        ),
        migrations.RunPython(singletons_skip, migrations.RunPython.noop),
    ]
