"""The Croniq groups see checks and their pings (docs/design.md §12); the
admins hold every permission on them, and so see a check's ping URL (its
secret: checks.admin shows it only to whoever may change checks).

Additive and idempotent like 0001: what an operator granted by hand stays.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

VIEWERS = "Croniq viewers"
OPERATORS = "Croniq operators"
ADMINS = "Croniq admins"


def ensure_permissions(apps, using):
    app_config = apps.get_app_config("checks")
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
    checks = Permission.objects.using(using).filter(content_type__app_label="checks")
    viewing = list(checks.filter(codename__in=["view_check", "view_ping"]))
    grants = {VIEWERS: viewing, OPERATORS: viewing, ADMINS: list(checks)}
    for name, permissions in grants.items():
        group, _ = Group.objects.using(using).get_or_create(name=name)
        group.permissions.add(*permissions)


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0004_dead_letter_groups"),
        ("checks", "0001_initial"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
