"""The Croniq admins hold every permission on projects and their roles
(docs/design.md §11: members are the admin role's); the viewers see the
projects, the roles are theirs to read only through the admins.

Additive and idempotent like 0001: what an operator granted by hand stays.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

ADMINS = "Croniq admins"
VIEWERS = ("Croniq viewers", "Croniq operators")


def ensure_permissions(apps, using):
    app_config = apps.get_app_config("projects")
    # As in 0001: the migration state's app config has no models module.
    models_module = getattr(app_config, "models_module", None)
    app_config.models_module = models_module or True
    try:
        create_permissions(app_config, verbosity=0, using=using, apps=apps)
    finally:
        app_config.models_module = models_module


def grant(apps, schema_editor):
    using = schema_editor.connection.alias
    ensure_permissions(apps, using)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    held = Permission.objects.using(using).filter(content_type__app_label="projects")
    group, _ = Group.objects.using(using).get_or_create(name=ADMINS)
    group.permissions.add(*held)
    seen = held.filter(codename="view_project")
    for name in VIEWERS:
        group, _ = Group.objects.using(using).get_or_create(name=name)
        group.permissions.add(*seen)


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0006_secret_groups"),
        ("projects", "0001_initial"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
