"""What `apply` writes shows in the audit trail of each job and calendar, as
an edit in the admin does: the events carry their target, so the job's
"audit trail" link (dashboard.queries.audit_events, target "type:id") lists
them, deletions included."""

import datetime as dt
from io import StringIO

import pytest
import time_machine
import yaml
from django.core.management import call_command

from calendars.models import Calendar
from dashboard.queries import audit_events
from notifications.models import Channel, Rule
from scheduler.models import Job
from tests.control.keyed_client import KeyedClient

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
DOCUMENT = {
    "calendars": [{"name": "workdays", "weekdays": ["mon", "tue", "wed", "thu", "fri"]}],
    "jobs": [{"name": "report", "schedule": "30 2 * * *", "command": "true",
              "calendar": "workdays"}],
}  # fmt: skip


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def run_apply(tmp_path, document, *args):
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump(document))
    call_command("apply", str(path), *args, stdout=StringIO())


def trail(row):
    """The actions of `row`'s audit trail, newest first, as the link shows them."""
    target = f"{row._meta.label_lower}:{row.pk}"
    return [event.action for event in audit_events(target=target).items]


def with_command(command):
    return {**DOCUMENT, "jobs": [{**DOCUMENT["jobs"][0], "command": command}]}


def test_a_jobs_audit_trail_lists_what_apply_did_to_it(tmp_path):
    run_apply(tmp_path, DOCUMENT)
    run_apply(tmp_path, with_command("python report.py"))

    job = Job.objects.get()
    assert trail(job) == ["job.changed", "job.created"]
    changed = audit_events(target=f"scheduler.job:{job.pk}").items[0]
    assert changed.target_repr == str(job)
    assert changed.data["diff"]["command"] == ["true", "python report.py"]
    assert trail(Calendar.objects.get()) == ["calendar.created"]


def test_a_pruned_job_and_calendar_keep_their_trail_to_the_end(tmp_path):
    run_apply(tmp_path, DOCUMENT)
    job, calendar = Job.objects.get(), Calendar.objects.get()

    run_apply(tmp_path, {}, "--prune")

    assert not Job.objects.exists() and not Calendar.objects.exists()
    assert trail(job) == ["job.deleted", "job.created"]
    assert trail(calendar) == ["calendar.deleted", "calendar.created"]


def test_the_apis_apply_targets_its_events_too(client):
    api = KeyedClient(client, ["jobs:write", "calendars:write"])

    api.post("apply", DOCUMENT)
    api.post("apply", with_command("false"))

    assert trail(Job.objects.get()) == ["job.changed", "job.created"]


def test_channels_and_rules_carry_their_target_too(tmp_path):
    notify = {
        "channels": [{"name": "ops-mail", "kind": "email", "to": ["ops@example.com"]}],
        "notify": [{"name": "failures", "events": ["job.failing"], "channels": ["ops-mail"]}],
    }
    run_apply(tmp_path, notify)
    channel, rule = Channel.objects.get(), Rule.objects.get()

    run_apply(tmp_path, {}, "--prune")

    assert trail(channel) == ["channel.deleted", "channel.created"]
    assert trail(rule) == ["rule.deleted", "rule.created"]
