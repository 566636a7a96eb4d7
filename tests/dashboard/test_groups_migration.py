"""Upgrading a database that holds jobs, runs, runners and staff users to the
per-action permissions and the three Croniq groups."""

from datetime import UTC, datetime

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GROUPS_MIGRATION = ("dashboard", "0001_croniq_groups")
NEW_PERMISSIONS = [
    "run_job",
    "pause_job",
    "cancel_execution",
    "retry_execution",
    "drain_runner",
    "forget_runner",
    "revoke_runnertoken",
]
VIEWING = {
    "audit.view_auditevent",
    "audit.view_counter",
    "audit.view_heartbeat",
    "calendars.view_calendar",
    "calendars.view_calendarperiod",
    "scheduler.view_job",
    "scheduler.view_execution",
    "scheduler.view_logchunk",
    "scheduler.view_jobhealth",
    "scheduler.view_deadletter",
    "scheduler.view_maintenanceswitch",
    "scheduler.view_maintenancewindow",
    "scheduler.view_concurrencygroup",
    "runners.view_runner",
    "runners.view_runnertoken",
}
NOTIFICATIONS = ["event", "channel", "rule", "mute", "notification", "delivery"]
VIEWING |= {f"notifications.view_{model}" for model in NOTIFICATIONS}
VIEWING |= {"checks.view_check", "checks.view_ping"}
VIEWING |= {"projects.view_project"}  # the projects; their members are the admins'
MUTING = {"notifications.add_mute", "notifications.change_mute"}
DAY_TO_DAY = {
    "scheduler.run_job",
    "scheduler.pause_job",
    "scheduler.cancel_execution",
    "scheduler.retry_execution",
    "scheduler.replay_deadletter",
    "scheduler.discard_deadletter",
    "runners.drain_runner",
    "notifications.add_mute",
    "notifications.change_mute",
}


def migrate(targets):
    """Migrate to `targets`; the models as they stand there."""
    MigrationExecutor(connection).migrate(targets)
    # Not the state `migrate` answers: after going backwards it may hold the
    # models of migrations planned after the last one unapplied.
    loader = MigrationLoader(connection)
    return loader.project_state(list(loader.applied_migrations)).apps


def before_the_upgrade():
    """The nodes the permission migrations follow: the database as it was."""
    loader = MigrationExecutor(connection).loader
    parents = [
        parent
        for node in [
            ("scheduler", "0004_action_permissions"),
            ("runners", "0002_action_permissions"),
        ]
        for parent in loader.graph.node_map[node].parents
        if parent.key[0] == node[0]
    ]
    # The notifications app came later still: it goes before the scheduler can.
    return [parent.key for parent in parents] + [("dashboard", None), ("notifications", None)]


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def granted(group):
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}


@pytest.fixture
def wave_one():
    """A database before the upgrade, with rows, a staff user holding model
    permissions by hand, and an "Croniq operators" group someone made
    earlier with a permission of their own choosing."""
    old = migrate(before_the_upgrade())
    Permission = old.get_model("auth", "Permission")
    Group = old.get_model("auth", "Group")
    # The test database was migrated to the end; make it look like wave 1.
    Permission.objects.filter(codename__in=NEW_PERMISSIONS).delete()
    Group.objects.filter(name__startswith="Croniq ").delete()

    job = old.get_model("scheduler", "Job").objects.create(
        name="nightly", schedule="30 2 * * *", command="echo hi", next_run_at=NOW
    )
    old.get_model("scheduler", "Execution").objects.create(
        job=job, scheduled_for=NOW, run_after=NOW, created_at=NOW, state="failed"
    )
    token = old.get_model("runners", "RunnerToken").objects.create(name="t", secret_hash="x" * 64)
    old.get_model("runners", "Runner").objects.create(
        name="web-1", token=token, session="s", registered_at=NOW, last_seen_at=NOW
    )
    alice = old.get_model("auth", "User").objects.create(username="alice", is_staff=True)
    alice.user_permissions.add(
        Permission.objects.get(codename="view_job"), Permission.objects.get(codename="change_job")
    )
    own = Group.objects.create(name="Croniq operators")
    own.permissions.add(Permission.objects.get(codename="delete_job"))
    yield
    migrate(everything())


def test_the_upgrade_creates_the_permissions_and_the_three_groups(wave_one):
    migrate(everything())
    Group = django_apps.get_model("auth", "Group")
    viewers = Group.objects.get(name="Croniq viewers")
    operators = Group.objects.get(name="Croniq operators")
    admins = Group.objects.get(name="Croniq admins")

    assert granted(viewers) == VIEWING
    # The permission someone gave the group by hand stays.
    assert granted(operators) == VIEWING | DAY_TO_DAY | MUTING | {"scheduler.delete_job"}
    assert {
        "runners.forget_runner",
        "runners.revoke_runnertoken",
        "runners.add_runnertoken",
        "calendars.change_calendar",
        "calendars.add_calendarperiod",
        "scheduler.change_job",
        "scheduler.add_job",
        "notifications.change_channel",
        "notifications.add_rule",
        "checks.change_check",
        "projects.add_project",
        "projects.change_role",
    } | VIEWING | DAY_TO_DAY | MUTING <= granted(admins)
    assert not {p for p in granted(admins) if p.split(".")[0] in {"auth", "sessions"}}


def test_existing_users_and_rows_survive_the_upgrade_unchanged(wave_one):
    migrate(everything())
    User = django_apps.get_model("auth", "User")
    alice = User.objects.get(username="alice")
    assert alice.get_all_permissions() == {"scheduler.view_job", "scheduler.change_job"}
    assert not alice.groups.exists()

    Job = django_apps.get_model("scheduler", "Job")
    job = Job.objects.get(name="nightly")
    assert job.next_run_at == NOW
    assert job.executions.get().state == "failed"
    runner = django_apps.get_model("runners", "Runner").objects.get(name="web-1")
    assert runner.token.name == "t"


def test_running_the_groups_migration_again_adds_nothing_twice(wave_one):
    migrate(everything())
    Group = django_apps.get_model("auth", "Group")
    first = {group.name: granted(group) for group in Group.objects.all()}
    migrate([("dashboard", None)])
    migrate(everything())
    assert {group.name: granted(group) for group in Group.objects.all()} == first
    assert Group.objects.filter(name__startswith="Croniq ").count() == 3
