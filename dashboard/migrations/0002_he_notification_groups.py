"""The notifications app's permissions for the three Croniq groups.

Viewers read channels, rules, mutes and the delivery log; operators also
mute and end mutes (an on-call's day-to-day); admins do everything, such as
editing channels and rules and sending test notifications. Additive and
idempotent like 0001.
"""

from importlib import import_module

from django.contrib.auth.management import create_permissions
from django.db import migrations

groups = import_module("dashboard.migrations.0001_croniq_groups")

APP = "notifications"
OPERATOR_ACTIONS = ["add_mute", "change_mute"]


def ensure_permissions(apps, using):
    # As in 0001: post_migrate has not created this app's permissions yet.
    app_config = apps.get_app_config(APP)
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
    everything = Permission.objects.using(using).filter(content_type__app_label=APP)
    viewing = list(everything.filter(codename__startswith="view_"))
    acting = list(everything.filter(codename__in=OPERATOR_ACTIONS))
    grants = {
        groups.VIEWERS: viewing,
        groups.OPERATORS: viewing + acting,
        groups.ADMINS: list(everything),
    }
    for name, permissions in grants.items():
        group, _ = Group.objects.using(using).get_or_create(name=name)
        group.permissions.add(*permissions)


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0001_croniq_groups"),
        ("notifications", "0001_initial"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
