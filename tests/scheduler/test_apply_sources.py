"""Several apply files side by side: each manages the jobs and calendars it
writes (`managed_source`, the file's stem or `--source`; channels and rules
alike), and its `--prune` deletes only those."""

import datetime as dt
import json
from io import StringIO

import pytest
import time_machine
import yaml
from django.core.management import CommandError, call_command
from django.urls import reverse

from calendars.models import Calendar
from notifications.models import Channel, Rule
from scheduler.models import Job
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
BILLING = {
    "calendars": [{"name": "workdays", "weekdays": ["mon", "tue", "wed", "thu", "fri"]}],
    "jobs": [
        {"name": "invoice", "schedule": "0 6 * * *", "command": "true", "calendar": "workdays"},
        {"name": "dunning", "schedule": "0 7 * * *", "command": "true"},
    ],
}
BACKUPS = {"jobs": [{"name": "backup", "schedule": "0 1 * * *", "command": "true"}]}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def run_apply(tmp_path, filename, document, *args):
    path = tmp_path / filename
    text = json.dumps(document) if filename.endswith(".json") else yaml.safe_dump(document)
    path.write_text(text)
    out = StringIO()
    call_command("apply", str(path), *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def sources():
    jobs = dict(Job.objects.values_list("name", "managed_source"))
    return jobs, dict(Calendar.objects.values_list("name", "managed_source"))


def test_a_file_manages_what_it_writes_under_its_stem(tmp_path):
    run_apply(tmp_path, "billing.yaml", BILLING)
    run_apply(tmp_path, "backups.json", BACKUPS)

    assert sources() == (
        {"invoice": "billing", "dunning": "billing", "backup": "backups"},
        {"workdays": "billing"},
    )


def test_prune_deletes_only_what_its_own_file_manages(tmp_path):
    run_apply(tmp_path, "billing.yaml", BILLING)
    run_apply(tmp_path, "backups.yaml", BACKUPS)

    out = run_apply(tmp_path, "backups.yaml", {"jobs": []}, "--prune")

    assert out.splitlines()[0] == "- job backup"
    assert "invoice" not in out and "workdays" not in out
    assert sources() == ({"invoice": "billing", "dunning": "billing"}, {"workdays": "billing"})


def test_source_names_the_file_whatever_its_path(tmp_path):
    run_apply(tmp_path, "billing.yaml", BILLING)

    smaller = {**BILLING, "jobs": BILLING["jobs"][:1]}
    out = run_apply(tmp_path, "billing-v2.yaml", smaller, "--prune", "--source", "billing")

    assert "- job dunning" in out
    assert sources() == ({"invoice": "billing"}, {"workdays": "billing"})


def test_a_file_that_lists_another_files_job_takes_it_over(tmp_path):
    run_apply(tmp_path, "billing.yaml", BILLING)

    out = run_apply(tmp_path, "ops.yaml", {"jobs": BILLING["jobs"][1:]})
    run_apply(tmp_path, "billing.yaml", {"calendars": BILLING["calendars"]}, "--prune")

    assert '    managed_source: "billing" -> "ops"' in out
    assert sources() == ({"dunning": "ops"}, {"workdays": "billing"})


def test_rows_of_no_file_are_claimed_by_the_first_apply_that_lists_them(tmp_path):
    # As a database upgraded from before managed_source holds them.
    JobFactory(name="dunning", schedule="0 7 * * *", command="true", managed_by="apply")
    JobFactory(name="legacy", managed_by="apply")

    out = run_apply(tmp_path, "billing.yaml", BILLING, "--prune")

    assert '~ job dunning: managed_source\n    managed_source: "" -> "billing"' in out
    assert "legacy" not in out
    assert sources()[0] == {"invoice": "billing", "dunning": "billing", "legacy": ""}


@pytest.mark.parametrize(
    "source, message",
    [
        ("", "source: required: a name for the file"),
        (" ", "source: required: a name for the file"),
        ("x" * 101, "source: at most 100 printable characters"),
        ("two\nlines", "source: at most 100 printable characters"),
    ],
)
def test_a_bad_source_is_refused_and_nothing_applied(tmp_path, source, message):
    err = StringIO()
    path = tmp_path / "billing.yaml"
    path.write_text(yaml.safe_dump(BILLING))

    with pytest.raises(CommandError, match="nothing applied"):
        call_command("apply", str(path), "--source", source, stdout=StringIO(), stderr=err)

    assert message in err.getvalue()
    assert sources() == ({}, {})


def test_the_calendar_admin_names_the_file_that_would_revert_an_edit(tmp_path, admin_client):
    run_apply(tmp_path, "billing.yaml", BILLING)
    calendar = Calendar.objects.get()

    page = admin_client.get(reverse("admin:calendars_calendar_change", args=[calendar.pk]))

    text = page.content.decode()
    assert "managed by apply of file billing" in text
    assert "the next apply of billing reverts edits made here" in text


def notify(name):
    return {
        "channels": [{"name": f"{name}-mail", "kind": "email", "to": ["ops@example.com"]}],
        "notify": [{"name": f"{name}-failures", "events": ["job.failing"],
                    "channels": [f"{name}-mail"]}],
    }  # fmt: skip


def test_channels_and_rules_are_pruned_only_by_the_file_that_made_them(tmp_path):
    run_apply(tmp_path, "billing.yaml", notify("billing"))
    run_apply(tmp_path, "backups.yaml", notify("backups"))
    # Stamped with its path by an apply from before files had names.
    Channel.objects.create(
        name="old-mail", kind="email", to=["a@b.c"], managed_by="apply", managed_source="x/old.yaml"
    )
    # Made, or adopted, in the admin: no file's to prune.
    hand = Channel.objects.create(name="hand-mail", kind="email", to=["a@b.c"])
    Rule.objects.create(name="hand-failures", events=["job.failing"]).channels.add(hand)
    Channel.objects.filter(name="backups-mail").update(managed_by="admin", managed_source="")

    out = run_apply(tmp_path, "backups.yaml", {}, "--prune")

    assert "- rule backups-failures" in out and "- channel" not in out
    assert sorted(Channel.objects.values_list("name", "managed_by", "managed_source")) == [
        ("backups-mail", "admin", ""),
        ("billing-mail", "apply", "billing"),
        ("hand-mail", "admin", ""),
        ("old-mail", "apply", "x/old.yaml"),
    ]
    assert sorted(Rule.objects.values_list("name", flat=True)) == [
        "billing-failures",
        "hand-failures",
    ]


def test_prune_deletes_the_channels_and_rules_of_its_file_alone(tmp_path):
    run_apply(tmp_path, "billing.yaml", notify("billing"))
    run_apply(tmp_path, "backups.yaml", notify("backups"))

    out = run_apply(tmp_path, "backups.yaml", {}, "--prune")

    assert "- channel backups-mail" in out and "- rule backups-failures" in out
    assert list(Channel.objects.values_list("name", "managed_by", "managed_source")) == [
        ("billing-mail", "apply", "billing")
    ]
    assert list(Rule.objects.values_list("name", "managed_by", "managed_source")) == [
        ("billing-failures", "apply", "billing")
    ]


def test_a_files_rows_stamped_with_its_path_are_still_its_own_to_prune(tmp_path):
    path = str(tmp_path / "billing.yaml")
    Channel.objects.create(
        name="old-mail", kind="email", to=["a@b.c"], managed_by="apply", managed_source=path
    )

    out = run_apply(tmp_path, "billing.yaml", {}, "--prune")

    assert "- channel old-mail" in out
    assert not Channel.objects.exists()
