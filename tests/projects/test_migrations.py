"""Projects' migrations upgrade a database holding wave-2 rows: every job,
calendar, concurrency group, check, channel, rule and secret lands in the
`default` project, which the migration creates; every API key stays global;
the global groups keep answering for every project."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [
    ("scheduler", "0027_job_limits"),
    ("calendars", "0003_calendar_managed_source"),
    ("checks", "0001_initial"),
    ("control", "0002_apikey_parent"),
    ("notifications", "0005_rule_checks"),
    ("vault", "0001_initial"),
    ("dashboard", "0006_secret_groups"),
]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_every_row_lands_in_default_and_keys_stay_global():
    MigrationExecutor(connection).migrate([*BEFORE, ("projects", None)])
    old = migrate(BEFORE)
    assert "projects_project" not in connection.introspection.table_names()
    calendar = old.get_model("calendars", "Calendar").objects.create(name="work", timezone="UTC")
    group = old.get_model("scheduler", "ConcurrencyGroup").objects.create(
        name="db", max_concurrent=2
    )
    job = old.get_model("scheduler", "Job").objects.create(
        name="sync", schedule="@hourly", command="./sync", next_run_at=T0, calendar=calendar
    )
    check = old.get_model("checks", "Check").objects.create(
        name="backup", period=3600, token="t" * 43
    )
    channel = old.get_model("notifications", "Channel").objects.create(
        name="ops", kind="webhook", url="https://hooks.example/x"
    )
    rule = old.get_model("notifications", "Rule").objects.create(name="all", events=["job.failed"])
    rule.channels.add(channel)
    key = old.get_model("control", "ApiKey").objects.create(
        name="ci", secret_hash="0" * 64, scopes=["jobs:read"]
    )
    try:
        new = migrate(everything())
        assert list(
            new.get_model("projects", "Project").objects.values_list("name", flat=True)
        ) == ["default"]
        for app, model, row in [
            ("calendars", "Calendar", calendar),
            ("scheduler", "ConcurrencyGroup", group),
            ("scheduler", "Job", job),
            ("checks", "Check", check),
            ("notifications", "Channel", channel),
            ("notifications", "Rule", rule),
        ]:
            assert new.get_model(app, model).objects.get(pk=row.pk).project == "default", model
        assert new.get_model("scheduler", "Job").objects.get(pk=job.pk).calendar_id == calendar.pk
        assert new.get_model("control", "ApiKey").objects.get(pk=key.pk).project == ""
        Group = new.get_model("auth", "Group")
        admins = Group.objects.get(name="Croniq admins").permissions
        assert admins.filter(content_type__app_label="projects", codename="add_role").exists()
        viewers = Group.objects.get(name="Croniq viewers").permissions
        assert not viewers.filter(codename="add_role").exists()
    finally:
        migrate(everything())
