"""The Croniq groups see the dead letters; operators and admins may replay
and discard them (day-to-day work, like retrying a run), the admins hold
every permission on them.

Additive and idempotent like 0001: what an operator granted by hand stays.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEWERS = "Croniq viewers"
OPERATORS = "Croniq operators"
ADMINS = "Croniq admins"

ACTING = ["replay_deadletter", "discard_deadletter"]


def ensure_permissions(apps, using):
    app_config = apps.get_app_config("scheduler")
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
    dead_letters = Permission.objects.using(using).filter(
        content_type__app_label="scheduler", content_type__model="deadletter"
    )
    viewing = list(dead_letters.filter(codename="view_deadletter"))
    acting = list(dead_letters.filter(codename__in=ACTING))
    grants = {VIEWERS: viewing, OPERATORS: viewing + acting, ADMINS: list(dead_letters)}
    for name, permissions in grants.items():
        group, _ = Group.objects.using(using).get_or_create(name=name)
        group.permissions.add(*permissions)


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0003_api_key_groups"),
        ("scheduler", "0011_dead_letters"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
