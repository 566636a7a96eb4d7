"""notifications 0004 upgrades a database holding channels and rules that
apply stamped with its file's name (or, older, its path or "api:<key>") in
`managed_by`, and ones made in the admin (empty): they take the ownership
jobs and calendars have (apply of that file, or the admin), and each file's
--prune still deletes its own alone. Downgrading gives the stamps back."""

from io import StringIO

import pytest
import yaml
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from notifications.models import Channel, Rule
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("notifications", "0003_channel_username")]
AFTER = [("notifications", "0004_channel_rule_ownership")]
LONG_PATH = "/srv/" + "deep/" * 30 + "croniq.yaml"  # too long to be a source name
STAMPS = {
    "croniq-mail": "croniq",
    "hand-mail": "",
    "path-mail": "ops/backups.yaml",
    "key-mail": "api:ci",
    "long-mail": LONG_PATH,
}


def leaf_nodes():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def old_rows():
    old = migrate(BEFORE)
    Channel_ = old.get_model("notifications", "Channel")
    Rule_ = old.get_model("notifications", "Rule")
    for name, stamp in STAMPS.items():
        channel = Channel_.objects.create(name=name, kind="email", to=["a@b.c"], managed_by=stamp)
        rule = Rule_.objects.create(
            name=name.replace("mail", "rule"), events=["job.failing"], managed_by=stamp
        )
        rule.channels.add(channel)


def owners(apps, model):
    rows = apps.get_model("notifications", model).objects.order_by("name")
    return list(rows.values_list("name", "managed_by", "managed_source"))


def test_stamped_rows_become_apply_of_their_file_and_the_others_the_admins():
    old_rows()
    try:
        new = migrate(AFTER)
        expected = [
            ("croniq-mail", "apply", "croniq"),
            ("hand-mail", "admin", ""),
            ("key-mail", "apply", "api:ci"),
            ("long-mail", "apply", ""),
            ("path-mail", "apply", "ops/backups.yaml"),
        ]
        assert owners(new, "Channel") == expected
        assert owners(new, "Rule") == [
            (name.replace("mail", "rule"), by, source) for name, by, source in expected
        ]
    finally:
        migrate(leaf_nodes())


def test_each_file_still_prunes_its_own_channels_and_rules_alone(tmp_path):
    old_rows()
    migrate(leaf_nodes())
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump({}))

    out = StringIO()
    call_command("apply", str(path), "--prune", stdout=out)

    assert "- channel croniq-mail" in out.getvalue() and "- rule croniq-rule" in out.getvalue()
    names = {"hand", "key", "long", "path"}
    assert set(Channel.objects.values_list("name", flat=True)) == {f"{n}-mail" for n in names}
    assert set(Rule.objects.values_list("name", flat=True)) == {f"{n}-rule" for n in names}


def test_downgrading_gives_the_stamps_back():
    old_rows()
    try:
        migrate(AFTER)
        old = migrate(BEFORE)
        channels = old.get_model("notifications", "Channel").objects
        assert dict(channels.values_list("name", "managed_by")) == {
            **STAMPS,
            "long-mail": "apply",  # its path was not kept: it belongs to no file
        }
        rules = old.get_model("notifications", "Rule").objects
        assert rules.get(name="path-rule").managed_by == "ops/backups.yaml"
        assert rules.get(name="hand-rule").managed_by == ""
    finally:
        migrate(leaf_nodes())
