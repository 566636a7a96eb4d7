"""`manage.py apply` with `channels:` and `notify:` (docs/design.md §9): created,
updated, unchanged on a second apply, pruned only where apply made them,
and every bad item refused with a message naming it, nothing applied."""

import copy
import json
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from calendars.models import Calendar
from notifications.models import Channel, Rule
from scheduler.apply import document as applyfile
from scheduler.apply import sections
from scheduler.apply.items import ApplyError
from scheduler.models import Job

pytestmark = pytest.mark.django_db

CRONIQ_SECRET_SLACK_URL = "https://hooks.slack.com/services/T000/B000/XXXXSECRETPATH"
DOCUMENT = {
    "calendars": [{"name": "workdays", "weekdays": ["mon", "tue", "wed", "thu", "fri"]}],
    "channels": [
        {"name": "ops-mail", "kind": "email", "to": ["ops@example.com"]},
        {
            "name": "ops-hook",
            "kind": "webhook",
            "url": "https://hooks.example.com/croniq",
            "secret": "${CRONIQ_SECRET_HOOK}",
            "headers": {"Authorization": "Bearer literal-token-123"},
        },
        {"name": "team-chat", "kind": "slack", "url": CRONIQ_SECRET_SLACK_URL, "format": "slack"},
    ],
    "notify": [
        {
            "name": "failures",
            "events": ["execution.given_up", "job.failing", "job.recovered", "job.missed"],
            "jobs": "billing-*",
            "failures_in_a_row": 3,
            "throttle": "30m",
            "channels": ["ops-mail", "ops-hook"],
        },
        {
            "name": "team-a",
            "events": ["job.slow"],
            "owner": "team-a",
            "calendar": "workdays",
            "grace": "1h30m",
            "slow_factor": 2.5,
            "channels": ["team-chat"],
        },
    ],
    "jobs": [
        {
            "name": "billing-sync",
            "schedule": "@hourly",
            "command": "true",
            "owner": "team-a",
            "max_duration": 900,
            "min_duration": "5s",
        }
    ],
}


@pytest.fixture(autouse=True)
def hook_secret(monkeypatch):
    monkeypatch.setenv("CRONIQ_SECRET_HOOK", "the-real-hook-secret")
    monkeypatch.delenv("CRONIQ_SECRET_UNSET", raising=False)


def write(tmp_path, document, name="croniq.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document))
    return str(path)


def run_apply(*args):
    out, err = StringIO(), StringIO()
    call_command("apply", *args, stdout=out, stderr=err)
    return out.getvalue()


def refused(*args):
    err = StringIO()
    with pytest.raises(CommandError, match="nothing applied"):
        call_command("apply", *args, stdout=StringIO(), stderr=err)
    return err.getvalue()


def snapshot():
    links = sorted(Rule.channels.through.objects.values_list("rule__name", "channel__name"))
    return {
        "jobs": list(Job.objects.order_by("name").values()),
        "calendars": list(Calendar.objects.order_by("name").values()),
        "channels": list(Channel.objects.order_by("name").values()),
        "rules": list(Rule.objects.order_by("name").values()),
        "links": links,
        "audit": AuditEvent.objects.count(),
    }


def test_apply_creates_channels_rules_and_the_jobs_notification_fields(tmp_path):
    path = write(tmp_path, DOCUMENT)
    out = run_apply(path)

    for line in ("+ channel ops-mail", "+ channel ops-hook", "+ channel team-chat"):
        assert line in out
    assert "+ rule failures" in out and "+ rule team-a" in out
    hook = Channel.objects.get(name="ops-hook")
    assert hook.config() == {
        "url": "https://hooks.example.com/croniq",
        "timeout": 5.0,
        "secret": "${CRONIQ_SECRET_HOOK}",  # the reference, never the value
        "headers": {"Authorization": "Bearer literal-token-123"},
    }
    assert (hook.managed_by, hook.managed_source) == ("apply", "croniq")
    assert Channel.objects.get(name="ops-mail").to == ["ops@example.com"]
    failures = Rule.objects.get(name="failures")
    assert failures.throttle == 1800
    assert failures.failures_in_a_row == 3 and failures.jobs == "billing-*"
    assert sorted(c.name for c in failures.channels.all()) == ["ops-hook", "ops-mail"]
    assert (failures.managed_by, failures.managed_source) == ("apply", "croniq")
    team = Rule.objects.get(name="team-a")
    assert (team.grace, team.slow_factor, team.calendar.name) == (5400, 2.5, "workdays")
    job = Job.objects.get(name="billing-sync")
    assert (job.owner, job.max_duration, job.min_duration) == ("team-a", 900, 5)
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"channel.created", "rule.created", "job.created", "calendar.created"} <= actions


def test_a_second_apply_changes_nothing(tmp_path):
    path = write(tmp_path, DOCUMENT)
    run_apply(path)
    before = snapshot()

    out = run_apply(path)

    assert "nothing to change" in out
    assert snapshot() == before


def test_a_change_is_planned_applied_and_audited(tmp_path):
    run_apply(write(tmp_path, DOCUMENT))
    changed = copy.deepcopy(DOCUMENT)
    changed["notify"][0]["throttle"] = "1h"
    changed["notify"][0]["channels"] = ["ops-mail"]
    changed["channels"][0]["to"] = ["ops@example.com", "oncall@example.com"]

    out = run_apply(write(tmp_path, changed))

    assert "~ rule failures: channels, throttle" in out
    assert "~ channel ops-mail: to" in out
    rule = Rule.objects.get(name="failures")
    assert rule.throttle == 3600
    assert [c.name for c in rule.channels.all()] == ["ops-mail"]
    event = AuditEvent.objects.get(action="rule.changed")
    assert event.data["diff"] == {
        "throttle": [1800, 3600],
        "channels": [["ops-hook", "ops-mail"], ["ops-mail"]],
    }
    assert event.data["via"] == "apply"


def test_secrets_header_values_and_chat_urls_never_reach_the_audit_trail(tmp_path):
    run_apply(write(tmp_path, DOCUMENT))
    changed = copy.deepcopy(DOCUMENT)
    changed["channels"][1]["secret"] = "${CRONIQ_SECRET_OTHER}"
    changed["channels"][1]["headers"] = {"Authorization": "Bearer new-token-456"}
    changed["channels"][2]["url"] = CRONIQ_SECRET_SLACK_URL + "2"

    with pytest.MonkeyPatch.context() as env:
        env.setenv("CRONIQ_SECRET_OTHER", "x" * 20)
        out = run_apply(write(tmp_path, changed), "--json")

    rows = {row["name"]: row["diff"] for row in json.loads(out)}
    assert rows["ops-hook"] == {
        "secret": ["********", "********"],
        "headers": [{"Authorization": "********"}, {"Authorization": "********"}],
    }
    assert rows["team-chat"] == {
        "url": ["https://hooks.slack.com/********", "https://hooks.slack.com/********"]
    }
    trail = json.dumps(list(AuditEvent.objects.values("data")))
    for secret in ("the-real-hook-secret", "literal-token-123", "new-token-456", "XXXXSECRET"):
        assert secret not in trail
    assert "CRONIQ_SECRET_HOOK" not in trail  # even the reference is masked


def test_dry_run_plans_and_changes_nothing(tmp_path):
    out = run_apply(write(tmp_path, DOCUMENT), "--dry-run")

    assert "+ channel ops-mail" in out and "+ rule failures" in out
    assert "would apply" in out
    assert not Channel.objects.exists() and not Rule.objects.exists()
    assert not Job.objects.exists() and not AuditEvent.objects.exists()


def test_prune_deletes_only_what_an_apply_made(tmp_path):
    run_apply(write(tmp_path, DOCUMENT))
    manual = Channel.objects.create(name="manual", kind="email", to=["me@example.com"])
    Rule.objects.create(name="manual-rule", events=["job.failing"]).channels.add(manual)
    smaller = copy.deepcopy(DOCUMENT)
    del smaller["channels"][2]  # team-chat
    del smaller["notify"][1]  # team-a, its only user

    out = run_apply(write(tmp_path, smaller), "--prune")

    assert "- channel team-chat" in out and "- rule team-a" in out
    assert sorted(Channel.objects.values_list("name", flat=True)) == [
        "manual",
        "ops-hook",
        "ops-mail",
    ]
    assert sorted(Rule.objects.values_list("name", flat=True)) == ["failures", "manual-rule"]
    assert AuditEvent.objects.filter(action="channel.deleted").count() == 1
    assert AuditEvent.objects.filter(action="rule.deleted").count() == 1


def test_without_prune_unlisted_channels_and_rules_stay(tmp_path):
    run_apply(write(tmp_path, DOCUMENT))
    run_apply(write(tmp_path, {"jobs": DOCUMENT["jobs"]}))
    assert Channel.objects.count() == 3 and Rule.objects.count() == 2


def test_prune_refuses_to_delete_a_channel_a_remaining_rule_uses(tmp_path):
    run_apply(write(tmp_path, DOCUMENT))
    manual = Rule.objects.create(name="manual-rule", events=["job.failing"])
    manual.channels.add(Channel.objects.get(name="team-chat"))
    smaller = copy.deepcopy(DOCUMENT)
    del smaller["channels"][2]
    del smaller["notify"][1]
    before = snapshot()

    err = refused(write(tmp_path, smaller), "--prune")

    assert "channels: 'team-chat' is still used by rule(s) manual-rule" in err
    assert snapshot() == before


def test_apply_takes_over_a_channel_made_in_the_admin(tmp_path):
    Channel.objects.create(name="ops-mail", kind="email", to=["ops@example.com"])
    path = write(tmp_path, DOCUMENT)

    out = run_apply(path)

    assert "~ channel ops-mail: managed_by, managed_source" in out
    mail = Channel.objects.get(name="ops-mail")
    assert (mail.managed_by, mail.managed_source) == ("apply", "croniq")


def bad(where, value):
    """The document with `value` set at `where` ("notify.0.throttle")."""

    def build():
        document = copy.deepcopy(DOCUMENT)
        *path, last = where.split(".")
        target = document
        for key in path:
            target = target[int(key)] if key.isdigit() else target[key]
        target[int(last) if last.isdigit() else last] = value
        return document

    return build


BAD_INPUT = {
    "malformed url": (
        bad("channels.1.url", "ftp://hooks.example.com/x"),
        "channels[1].url: not an http(s) URL: 'ftp://hooks.example.com/x'",
    ),
    "url without host": (bad("channels.2.url", "https://"), "channels[2].url: no host in"),
    "malformed address": (
        bad("channels.0.to", ["ops-at-example.com"]),
        "channels[0].to: not an email address: 'ops-at-example.com'",
    ),
    "unknown kind": (bad("channels.0.kind", "sms"), "channels[0].kind: unknown channel kind 'sms'"),
    "unknown format": (bad("channels.2.format", "irc"), "channels[2].format: unknown format 'irc'"),
    "setting of another kind": (
        bad("channels.0.url", "https://example.com"),
        "channels[0].url: unknown setting of a email channel",
    ),
    "unset secret": (
        bad("channels.1.secret", "${CRONIQ_SECRET_UNSET}"),
        "channels[1].secret: ${CRONIQ_SECRET_UNSET} is not set",
    ),
    "literal secret": (
        bad("channels.1.secret", "hunter2"),
        "channels[1].secret: not a secret reference",
    ),
    "bad channel name": (bad("channels.0.name", "ops mail"), "channels[0].name:"),
    "unknown event": (
        bad("notify.0.events", ["job.failing", "job.exploded"]),
        "notify[0].events: unknown event 'job.exploded'",
    ),
    "no events": (bad("notify.0.events", []), "notify[0].events: required"),
    "routes to no channel": (
        bad("notify.0.channels", []),
        "notify[0].channels: a rule must route to at least one channel",
    ),
    "unknown channel": (
        bad("notify.0.channels", ["ops-mail", "ops-pager"]),
        "notify[0].channels: unknown channel 'ops-pager'",
    ),
    "negative threshold": (
        bad("notify.0.failures_in_a_row", -3),
        "notify[0].failures_in_a_row: a whole number of at least 1, got -3",
    ),
    "fractional threshold": (
        bad("notify.0.failures_in_a_row", 2.5),
        "notify[0].failures_in_a_row: a whole number of at least 1, got 2.5",
    ),
    "negative throttle": (
        bad("notify.0.throttle", -60),
        "notify[0].throttle: must be at least 0 second(s), got -60",
    ),
    "throttle in words": (bad("notify.0.throttle", "soon"), "notify[0].throttle: 'soon' is not"),
    "slow factor below one": (bad("notify.1.slow_factor", 0.5), "notify[1].slow_factor:"),
    "unknown calendar": (
        bad("notify.1.calendar", "holidays"),
        "notify[1].calendar: no calendar named 'holidays'",
    ),
    "not a boolean": (bad("notify.0.fallback", "yes"), "notify[0].fallback: true or false"),
    "unknown rule field": (bad("notify.0.team", "a"), "notify[0]: unknown field(s): team"),
    "zero max duration": (
        bad("jobs.0.max_duration", 0),
        "jobs[0].max_duration: must be at least 1 second(s), got 0",
    ),
    "max duration in words": (bad("jobs.0.max_duration", "long"), "jobs[0].max_duration:"),
    "channels not a list": (bad("channels", {"ops-mail": {}}), "channels: expected a list"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_refused_naming_item_and_field_and_nothing_changes(tmp_path, case):
    build, message = BAD_INPUT[case]
    run_apply(write(tmp_path, DOCUMENT))
    document = build()
    # Good changes beside the bad one: none of them may be applied.
    document["jobs"][0]["command"] = "python other.py"
    document["jobs"].append({"name": "new-job", "schedule": "@daily", "command": "true"})
    if isinstance(document["channels"], list):
        document["channels"].append({"name": "new-mail", "kind": "email", "to": ["a@b.example"]})
    before = snapshot()

    err = refused(write(tmp_path, document))

    assert message in err
    assert snapshot() == before


def test_a_bad_item_on_a_fresh_database_applies_nothing_at_all(tmp_path):
    document = bad("notify.0.channels", ["ops-pager"])()

    err = refused(write(tmp_path, document))

    assert "notify[0].channels: unknown channel 'ops-pager'" in err
    assert not Job.objects.exists() and not Calendar.objects.exists()
    assert not Channel.objects.exists() and not Rule.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_refused_channel_is_reported_once_not_again_by_its_rules(tmp_path):
    document = bad("channels.0.to", ["nope"])()

    err = refused(write(tmp_path, document))

    assert "channels[0].to: not an email address: 'nope'" in err
    assert "unknown channel 'ops-mail'" not in err


def test_the_sections_are_read_only_when_an_app_adds_them(tmp_path, monkeypatch):
    path = write(tmp_path, DOCUMENT)
    monkeypatch.setattr(sections, "_sections", [])

    with pytest.raises(ApplyError, match="unknown top-level key"):
        applyfile.load(path)


def test_a_chat_channels_username_is_kept_and_posted_as(tmp_path):
    document = copy.deepcopy(DOCUMENT)
    document["channels"][2]["username"] = "Croniq"
    run_apply(write(tmp_path, document))

    chat = Channel.objects.get(name="team-chat")
    assert chat.username == "Croniq"
    assert chat.config()["username"] == "Croniq"  # what delivery sends with
    assert "nothing to change" in run_apply(write(tmp_path, document))

    del document["channels"][2]["username"]
    run_apply(write(tmp_path, document))
    assert "username" not in Channel.objects.get(name="team-chat").config()
