"""Projects and the roles held in them (docs/design.md §11), and the
`default` project every row made before them belongs to."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def create_default(apps, schema_editor):
    """Every row written before projects existed belongs to `default`."""
    Project = apps.get_model("projects", "Project")
    Project.objects.get_or_create(
        name="default", defaults={"description": "Everything made before projects existed."}
    )


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Project',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.SlugField(max_length=100, unique=True)),
                ('description', models.TextField(blank=True, default='')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='Role',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('role', models.CharField(choices=[('viewer', 'viewer'), ('operator', 'operator'), ('editor', 'editor'), ('admin', 'admin')], max_length=10)),
                ('from_sso', models.BooleanField(default=False, editable=False)),
                ('group', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, to='auth.group')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='roles', to='projects.project')),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['project__name', 'role'],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('group__isnull', True), ('user__isnull', False)), models.Q(('group__isnull', False), ('user__isnull', True)), _connector='OR'), name='role_user_or_group'), models.UniqueConstraint(fields=('project', 'user'), name='role_project_user'), models.UniqueConstraint(fields=('project', 'group'), name='role_project_group')],
            },
        ),
        migrations.RunPython(create_default, migrations.RunPython.noop),
    ]
