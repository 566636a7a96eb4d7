"""The Croniq groups see notifications (the dashboard's Alerts page); the
operators may also mute, the admins manage channels and rules.

Additive and idempotent like 0001: what an operator granted by hand stays.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEWERS = "Croniq viewers"
OPERATORS = "Croniq operators"
ADMINS = "Croniq admins"

# Silencing a noisy job at 03:00 is on-call work, not an admin's.
MUTING = ["add_mute", "change_mute", "delete_mute"]


def grant(apps, schema_editor):
    using = schema_editor.connection.alias
    app_config = apps.get_app_config("notifications")
    # As in 0001: the migration state's app config has no models module.
    models_module = getattr(app_config, "models_module", None)
    app_config.models_module = models_module or True
    try:
        create_permissions(app_config, verbosity=0, using=using, apps=apps)
    finally:
        app_config.models_module = models_module
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    notifications = Permission.objects.using(using).filter(
        content_type__app_label="notifications"
    )
    viewing = list(notifications.filter(codename__startswith="view_"))
    muting = list(notifications.filter(codename__in=MUTING))
    grants = {VIEWERS: viewing, OPERATORS: viewing + muting, ADMINS: list(notifications)}
    for name, permissions in grants.items():
        group, _ = Group.objects.using(using).get_or_create(name=name)
        group.permissions.add(*permissions)


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0001_croniq_groups"),
        ("notifications", "0001_initial"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
