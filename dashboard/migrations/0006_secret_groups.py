"""The Croniq admins hold every permission on secrets (docs/design.md §11:
secrets are the admin role's); viewers and operators hold none, so they do
not even see the names.

Additive and idempotent like 0001: what an operator granted by hand stays.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

ADMINS = "Croniq admins"


def ensure_permissions(apps, using):
    app_config = apps.get_app_config("vault")
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
    secrets = Permission.objects.using(using).filter(content_type__app_label="vault")
    group, _ = Group.objects.using(using).get_or_create(name=ADMINS)
    group.permissions.add(*secrets)


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0005_check_groups"),
        ("vault", "0001_initial"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
