"""The three groups operators put people in: viewers, operators, admins.

Idempotent and additive: a group that exists is kept, permissions are only
ever added, so what an operator granted a group by hand stays. Reversing it
leaves the groups alone (their members would otherwise lose access).
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

CRONIQ_APPS = ["audit", "calendars", "scheduler", "runners"]

VIEWERS = "Croniq viewers"
OPERATORS = "Croniq operators"
ADMINS = "Croniq admins"

# What operators may do besides reading: the day-to-day actions. Forgetting a
# runner, revoking tokens and editing jobs or calendars stay with the admins.
OPERATOR_ACTIONS = [
    ("scheduler", "run_job"),
    ("scheduler", "pause_job"),
    ("scheduler", "cancel_execution"),
    ("scheduler", "retry_execution"),
    ("runners", "drain_runner"),
]


def ensure_permissions(apps, using):
    """Permissions are created by post_migrate, which has not run yet for
    the permissions this migration's dependencies just declared."""
    for label in CRONIQ_APPS:
        app_config = apps.get_app_config(label)
        # create_permissions skips app configs without a models module, as
        # the migration state's stand-ins are.
        models_module = getattr(app_config, "models_module", None)
        app_config.models_module = models_module or True
        try:
            create_permissions(app_config, verbosity=0, using=using, apps=apps)
        finally:
            app_config.models_module = models_module


def create_groups(apps, schema_editor):
    using = schema_editor.connection.alias
    ensure_permissions(apps, using)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    croniq = Permission.objects.using(using).filter(content_type__app_label__in=CRONIQ_APPS)
    viewing = list(croniq.filter(codename__startswith="view_"))
    acting = [croniq.get(content_type__app_label=app, codename=code) for app, code in OPERATOR_ACTIONS]
    grants = {VIEWERS: viewing, OPERATORS: viewing + acting, ADMINS: list(croniq)}
    for name, permissions in grants.items():
        group, _ = Group.objects.using(using).get_or_create(name=name)
        group.permissions.add(*permissions)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("audit", "0004_counter_shards"),
        ("calendars", "0001_initial"),
        ("scheduler", "0004_action_permissions"),
        ("runners", "0002_action_permissions"),
    ]

    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
