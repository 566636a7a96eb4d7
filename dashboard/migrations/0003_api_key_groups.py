"""The Croniq admins create, see and revoke API keys (the management API);
viewers and operators get none of it: a key acts without a person behind it.

Additive and idempotent like 0001 and 0002.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

ADMINS = "Croniq admins"
KEY_PERMISSIONS = ["add_apikey", "view_apikey", "revoke_apikey"]


def ensure_permissions(apps, using):
    app_config = apps.get_app_config("control")
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
    granted = Permission.objects.using(using).filter(
        content_type__app_label="control", codename__in=KEY_PERMISSIONS
    )
    group, _ = Group.objects.using(using).get_or_create(name=ADMINS)
    group.permissions.add(*granted)


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0002_notification_groups"),
        ("control", "0001_initial"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
