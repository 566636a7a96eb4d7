"""`POST /api/v1/apply` with channels and rules: they need notifications:write
(a channel sends what it reads to the URL it names), for the sections, a dry
run and a prune that would delete them; what apply answers of them masks
credentials, and warns of secrets the notifier reads from its own
environment."""

import copy
from io import StringIO

import pytest
import yaml
from django.core.management import call_command

from audit.models import AuditEvent
from calendars.models import Calendar
from notifications.models import Channel, Rule
from scheduler.models import Job
from tests.control.keyed_client import KeyedClient

pytestmark = pytest.mark.django_db

JOBS = [{"name": "report", "schedule": "30 2 * * *", "command": "true"}]
CHANNELS = [{"name": "ops-hook", "kind": "webhook", "url": "https://hooks.example.com/croniq"}]
RULES = [{"name": "failures", "events": ["job.failing"], "channels": ["ops-hook"]}]
WITH_CHANNELS = {"jobs": JOBS, "channels": CHANNELS, "notify": RULES}
JOBS_AND_CALENDARS = ["jobs:write", "calendars:write"]


def snapshot():
    tables = (Job, Calendar, Channel, Rule, AuditEvent)
    return [list(model.objects.order_by("pk").values()) for model in tables]


@pytest.mark.parametrize(
    "document",
    [
        WITH_CHANNELS,
        {"jobs": JOBS, "channels": CHANNELS},
        {"jobs": JOBS, "notify": []},
        {"channels": [{**CHANNELS[0], "headers": {"X-Key": "${SECRET_KEY}"}}]},
    ],
    ids=["both", "channels", "empty-notify", "hostile-header"],
)
@pytest.mark.parametrize("dry_run", ["false", "true"])
def test_channels_and_rules_need_notifications_write(client, document, dry_run):
    api = KeyedClient(client, JOBS_AND_CALENDARS)
    before = snapshot()

    answer = api.post("apply", document, dry_run=dry_run)

    assert (answer.status_code, answer.json()) == (
        403,
        {"detail": "needs scope notifications:write"},
    )
    assert snapshot() == before


@pytest.mark.parametrize("key_scopes", [[*JOBS_AND_CALENDARS, "notifications:write"], ["admin"]])
def test_a_key_with_notifications_write_or_admin_applies_them(client, key_scopes):
    answer = KeyedClient(client, key_scopes).post("apply", WITH_CHANNELS)

    assert answer.status_code == 200, answer.content
    channel = Channel.objects.get()
    assert (channel.managed_by, channel.managed_source) == ("apply", "api")
    assert Rule.objects.get().channels.get().name == "ops-hook"


def test_a_document_without_them_needs_no_notifications_scope(client):
    answer = KeyedClient(client, JOBS_AND_CALENDARS).post("apply", {"jobs": JOBS}, prune="true")
    assert answer.status_code == 200, answer.content


def test_a_prune_that_would_delete_channels_or_rules_needs_notifications_write(client):
    writer = KeyedClient(client, [*JOBS_AND_CALENDARS, "notifications:write"], name="ops")
    assert writer.post("apply", WITH_CHANNELS, source="croniq").status_code == 200
    jobs_only = KeyedClient(client, JOBS_AND_CALENDARS, name="deploy")
    before = snapshot()

    pruning = jobs_only.post("apply", {"jobs": JOBS}, prune="true", source="croniq")

    assert (pruning.status_code, pruning.json()) == (
        403,
        {"detail": "needs scope notifications:write"},
    )
    assert snapshot() == before
    # Another file's name prunes none of them: no scope needed.
    other = jobs_only.post("apply", {"jobs": JOBS}, prune="true", source="elsewhere")
    assert other.status_code == 200
    assert Channel.objects.exists() and Rule.objects.exists()
    # The writer may prune them.
    assert writer.post("apply", {"jobs": JOBS}, prune="true", source="croniq").status_code == 200
    assert not Channel.objects.exists() and not Rule.objects.exists()


def test_the_command_line_needs_no_scope(tmp_path):
    # manage.py apply runs as the server's operator.
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump(WITH_CHANNELS))
    call_command("apply", str(path), stdout=StringIO(), stderr=StringIO())
    assert Channel.objects.filter(name="ops-hook").exists()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:hunter2@hooks.example.com", "https://********@hooks.example.com"),
        (
            "https://user:hunter2@hooks.example.com/in",
            "https://********@hooks.example.com/********",
        ),
        ("https://hooks.example.com?token=hunter2", "https://hooks.example.com/********"),
        ("https://hooks.example.com/?token=hunter2", "https://hooks.example.com/********"),
        ("https://hooks.example.com#hunter2", "https://hooks.example.com/********"),
        ("https://hooks.example.com/services/hunter2", "https://hooks.example.com/********"),
        ("https://hooks.example.com", "https://hooks.example.com"),
        ("https://hooks.example.com/", "https://hooks.example.com/"),
        (
            "https://bot:hunter2@hooks.example.com/${CRONIQ_SECRET_HOOK_PATH}",
            "https://********@hooks.example.com/${CRONIQ_SECRET_HOOK_PATH}",
        ),
    ],
)
def test_url_credentials_and_queries_never_show_in_the_answer_or_the_trail(
    client, monkeypatch, url, shown
):
    monkeypatch.setenv("CRONIQ_SECRET_HOOK_PATH", "croniq")
    api = KeyedClient(client, ["admin"])
    document = {"channels": [{**CHANNELS[0], "url": url}]}

    answer = api.post("apply", document)

    assert answer.status_code == 200, answer.content
    [change] = answer.json()["changes"]
    assert change["diff"]["url"] == [None, shown]
    trail = str(list(AuditEvent.objects.values("data")))
    assert "hunter2" not in answer.content.decode() and "hunter2" not in trail
    assert Channel.objects.get().url == url  # stored as written


def test_a_changed_credential_still_shows_as_a_change(client):
    api = KeyedClient(client, ["admin"])
    first = {"channels": [{**CHANNELS[0], "url": "https://a:one@hooks.example.com"}]}
    second = copy.deepcopy(first)
    second["channels"][0]["url"] = "https://a:two@hooks.example.com"
    api.post("apply", first)

    [change] = api.post("apply", second).json()["changes"]

    assert change["action"] == "update"
    assert change["diff"]["url"] == ["https://********@hooks.example.com"] * 2


# -- secrets the notifier reads from its own environment ---------------------------


def test_an_environment_reference_is_applied_with_a_warning(client, monkeypatch):
    monkeypatch.setenv("CRONIQ_SECRET_HOOK", "s3cret-value")
    monkeypatch.setenv("CRONIQ_SECRET_TOKEN", "t0ken-value")
    hook = {
        **CHANNELS[0],
        "secret": "${CRONIQ_SECRET_HOOK}",
        "headers": {"Authorization": "Bearer ${CRONIQ_SECRET_TOKEN}"},
    }
    api = KeyedClient(client, ["admin"])

    answer = api.post("apply", {"channels": [hook]})

    assert answer.status_code == 200, answer.content
    warnings = answer.json()["warnings"]
    assert [warning.split(":")[0] for warning in warnings] == [
        "channels[0].secret",
        "channels[0].headers.Authorization",
    ]
    assert "${CRONIQ_SECRET_HOOK} is read by the notifier" in warnings[0]
    assert "scheduler_loop or serve" in warnings[0] and "/run/secrets" in warnings[0]
    assert "s3cret-value" not in answer.content.decode()


def test_a_file_reference_is_applied_without_a_warning(client, tmp_path, settings):
    settings.CRONIQ_SECRETS_DIR = str(tmp_path)
    (tmp_path / "hook").write_text("s3cret-value\n")
    hook = {**CHANNELS[0], "secret": f"file:{tmp_path}/hook"}

    answer = KeyedClient(client, ["admin"]).post("apply", {"channels": [hook]})

    assert answer.status_code == 200, answer.content
    assert answer.json()["warnings"] == []


def test_manage_py_apply_prints_the_warning_on_stderr(tmp_path, monkeypatch):
    monkeypatch.setenv("CRONIQ_SECRET_HOOK", "s3cret-value")
    path = tmp_path / "croniq.yaml"
    path.write_text(
        yaml.safe_dump({"channels": [{**CHANNELS[0], "secret": "${CRONIQ_SECRET_HOOK}"}]})
    )
    out, err = StringIO(), StringIO()

    call_command("apply", str(path), stdout=out, stderr=err)

    assert "warning: channels[0].secret: ${CRONIQ_SECRET_HOOK} is read by the notifier" in (
        err.getvalue()
    )
    assert "warning" not in out.getvalue()


def test_a_reference_to_a_server_secret_is_422_naming_the_field(client, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "the-server-key")
    hostile = {**CHANNELS[0], "headers": {"X-Key": "${SECRET_KEY}"}}
    api = KeyedClient(client, ["admin"])
    before = snapshot()

    answer = api.post("apply", {"channels": [hostile]})

    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert detail.startswith("channels[0].headers: X-Key: ${SECRET_KEY}: a channel reads only")
    assert "the-server-key" not in detail
    assert snapshot() == before


def test_a_file_outside_the_secrets_dir_is_422_naming_the_field(client):
    hostile = {**CHANNELS[0], "url": "file:/proc/self/environ"}
    answer = KeyedClient(client, ["admin"]).post("apply", {"channels": [hostile]})
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith(
        "channels[0].url: file:/proc/self/environ: a channel reads only files under /run/secrets"
    )
