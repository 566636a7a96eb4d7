"""The check-in migrations upgrade a database holding earlier rows: the
rules and notifications there keep routing as before (no checks glob, no
check subject), and the new tables start empty."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("notifications", "0004_channel_rule_ownership")]
AFTER = [("notifications", "0005_rule_checks"), ("checks", "0001_initial")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def before_checks():
    """The database before the check-ins: no checks tables, notifications at 0004."""
    executor = MigrationExecutor(connection)
    executor.migrate([("checks", None), *BEFORE])
    return migrate(BEFORE)


def test_rules_and_notifications_survive_and_checks_start_empty():
    old = before_checks()
    assert "checks_check" not in connection.introspection.table_names()
    Channel = old.get_model("notifications", "Channel")
    Rule = old.get_model("notifications", "Rule")
    Notification = old.get_model("notifications", "Notification")
    channel = Channel.objects.create(name="ops-mail", kind="email", to=["ops@example.com"])
    rule = Rule.objects.create(name="failures", events=["job.failing"], jobs="billing-*")
    rule.channels.add(channel)
    sent = Notification.objects.create(
        name="job.failing", channel=channel, rule=rule, created_at=T0, runner_name="r1"
    )
    try:
        new = migrate(AFTER)
        upgraded = new.get_model("notifications", "Rule").objects.get(pk=rule.pk)
        assert (upgraded.jobs, upgraded.checks, upgraded.events) == (
            "billing-*",
            "",
            ["job.failing"],
        )
        kept = new.get_model("notifications", "Notification").objects.get(pk=sent.pk)
        assert (kept.runner_name, kept.check_name) == ("r1", "")
        Check = new.get_model("checks", "Check")
        assert Check.objects.count() == 0
        made = Check.objects.create(name="backup", period=3600, token="t" * 43)
        assert (made.state, made.grace, made.project) == ("new", 60, "default")
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
