"""A job's webhook URL (control.webhooks_api, scheduler.jobs.webhooks;
docs/design.md §14), from the side of whoever holds, guesses or steals it."""

import datetime as dt
import json

import pytest
import time_machine
from django.conf import settings
from django.core.signing import Signer
from django.test import Client

from audit.models import AuditEvent
from dispatch.claims import assignment
from notifications.signatures import sign
from scheduler.jobs import webhooks
from scheduler.models import Execution, Job
from tests.control.keyed_client import KeyedClient

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
DEPLOY = {
    "name": "deploy",
    "command": 'echo "$CRONIQ_TRIGGER $VERSION"',
    "parameters": ["VERSION"],
    "webhook": True,
}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def key(*scopes):
    return KeyedClient(Client(), list(scopes), name="-".join(scopes))


@pytest.fixture
def writer(db):
    return key("jobs:read", "jobs:write")


@pytest.fixture
def deploy(writer):
    answer = writer.post("jobs", DEPLOY)
    assert answer.status_code == 201, answer.content
    return answer.json()["webhook_url"]


def call(url, body=b"", **headers):
    path = url.removeprefix(settings.CRONIQ_PUBLIC_URL)
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    return Client().generic(
        "POST", path, data=body, content_type="application/json", headers=headers
    )


def runs():
    return list(Execution.objects.values_list("job__name", "trigger", "env"))


def test_a_writer_is_shown_the_url_and_a_read_only_key_never(writer, deploy):
    assert deploy.startswith(f"{settings.CRONIQ_PUBLIC_URL}/api/v1/hooks/")
    assert writer.get("jobs/deploy").json()["webhook_url"] == deploy
    reader = key("jobs:read")
    assert reader.get("jobs/deploy").json()["webhook_url"] is None
    [listed] = reader.get("jobs").json()["items"]
    assert (listed["webhook"], listed["webhook_url"]) == (True, None)
    # Nor does the audit trail or the stored row hold a URL that runs the job.
    token = deploy.rsplit("/", 1)[1]
    assert token not in json.dumps(list(AuditEvent.objects.values("data")))
    assert token not in json.dumps(list(Job.objects.values()), default=str)


def test_a_call_runs_the_job_with_its_parameters_and_trigger_webhook(deploy):
    answer = call(deploy, {"env": {"VERSION": "1.4.2"}})

    assert answer.status_code == 202, answer.content
    execution = Execution.objects.get()
    assert answer.json() == {"execution_id": execution.pk, "deduplicated": False}
    assert runs() == [("deploy", "webhook", {"VERSION": "1.4.2"})]
    given = assignment(execution)
    assert (given["trigger"], given["env"]) == ("webhook", {"VERSION": "1.4.2"})
    event = AuditEvent.objects.get(action="job.run_now")
    assert (event.actor_kind, event.actor_name, event.data["by"]) == (
        "system",
        "webhook",
        "webhook",
    )


def test_a_job_with_a_webhook_needs_no_schedule_and_a_call_needs_no_body(deploy):
    assert call(deploy).status_code == 202
    assert runs() == [("deploy", "webhook", {})]


def test_a_replayed_idempotency_key_answers_the_first_run_and_runs_nothing(deploy):
    first = call(deploy, {"env": {"VERSION": "1"}}, **{"Idempotency-Key": "build-77"})
    again = call(deploy, {"env": {"VERSION": "2"}}, **{"Idempotency-Key": "build-77"})

    assert again.status_code == 202
    assert again.json() == {**first.json(), "deduplicated": True}
    assert runs() == [("deploy", "webhook", {"VERSION": "1"})]


@pytest.mark.parametrize(
    ("body", "headers", "detail"),
    [
        ({"env": {"PATH": "/tmp/evil"}}, {}, "env.PATH: not a parameter of deploy"),
        ({"env": {"VERSION": 2}}, {}, "body.env.VERSION: Input should be a valid string"),
        ({"job": "other", "env": {}}, {}, "body.job: Extra inputs are not permitted"),
        (b"{not json", {}, "body: Invalid JSON"),
        (b"[]", {}, "body: Input should be an object"),
        ({}, {"Idempotency-Key": "k" * 201}, "Idempotency-Key: 1 to 200 characters"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_runs_nothing(deploy, body, headers, detail):
    answer = call(deploy, body, **headers)

    assert answer.status_code == 422
    assert answer.json()["detail"].startswith(detail)
    assert runs() == []


def test_a_body_past_the_limit_is_refused(deploy):
    answer = call(deploy, b" " * (64 * 1024 + 1))
    assert (answer.status_code, runs()) == (413, [])


def test_every_url_that_runs_no_job_is_the_same_404(writer, deploy, settings):
    writer.post("jobs", {**DEPLOY, "name": "gone"})
    gone = writer.get("jobs/gone").json()["webhook_url"]
    writer.delete("jobs/gone")
    writer.post("jobs", {**DEPLOY, "name": "switched-off", "schedule": "0 3 * * *"})
    switched_off = writer.get("jobs/switched-off").json()["webhook_url"]
    writer.patch("jobs/switched-off", {"webhook": False})
    base = f"{settings.CRONIQ_PUBLIC_URL}/api/v1/hooks/"
    # The stored key (a database read), signed without this server's SECRET_KEY.
    stored = Job.objects.get(name="deploy").webhook_key
    forged = base + Signer(key="another server", salt=webhooks.SALT, sep=".").sign(stored)

    for url in (base + "nonsense", base + "A" * 22 + "." + "B" * 43, forged, gone, switched_off):
        answer = call(url, {"env": {"VERSION": "1"}})
        assert (answer.status_code, answer.json()) == (404, {"detail": "no such webhook"}), url
    assert runs() == []


def test_a_url_is_made_with_the_servers_secret_key_and_survives_its_rotation(deploy, settings):
    old = settings.SECRET_KEY
    settings.SECRET_KEY = "the new key"
    assert call(deploy).status_code == 404  # a database read alone runs nothing
    settings.SECRET_KEY_FALLBACKS = [old]
    assert call(deploy).status_code == 202
    rotated = key("jobs:write").post("jobs/deploy/webhook").json()["webhook_url"]
    settings.SECRET_KEY_FALLBACKS = []
    with time_machine.travel(NOW + dt.timedelta(seconds=1), tick=False):
        assert call(rotated).status_code == 202


def test_a_token_of_another_job_runs_that_job_alone(writer, deploy):
    writer.post("jobs", {**DEPLOY, "name": "cleanup", "parameters": []})
    cleanup = writer.get("jobs/cleanup").json()["webhook_url"]

    assert call(cleanup, {"env": {"VERSION": "1"}}).status_code == 422
    assert call(cleanup).status_code == 202
    assert runs() == [("cleanup", "webhook", {})]


def test_regenerating_gives_a_new_url_and_the_old_one_stops_at_once(writer, deploy):
    answer = writer.post("jobs/deploy/webhook")

    assert answer.status_code == 200
    fresh = answer.json()["webhook_url"]
    assert fresh != deploy
    assert call(deploy).status_code == 404
    assert call(fresh).status_code == 202
    event = AuditEvent.objects.get(action="job.webhook_regenerated")
    assert event.actor_kind == "api_key"
    assert key("jobs:read").post("jobs/deploy/webhook").status_code == 403
    writer.post("jobs", {"name": "plain", "schedule": "0 3 * * *", "command": "true"})
    assert writer.post("jobs/plain/webhook").status_code == 409


def test_turned_off_and_on_again_a_job_gets_a_new_url(writer, deploy):
    # Without its webhook, a job needs a schedule.
    refused = writer.patch("jobs/deploy", {"webhook": False})
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("schedule: required, unless")
    writer.patch("jobs/deploy", {"webhook": False, "schedule": "0 3 * * *"})
    again = writer.patch("jobs/deploy", {"webhook": True}).json()["webhook_url"]

    assert again not in (None, deploy)
    assert call(deploy).status_code == 404
    assert call(again).status_code == 202


def test_a_paused_or_disabled_job_runs_when_called_as_a_trigger_runs_it(writer, deploy):
    writer.post("jobs/deploy/pause", {"reason": "freeze"})
    writer.patch("jobs/deploy", {"enabled": False})
    assert call(deploy).status_code == 202


def test_a_full_queue_is_429_with_retry_after(deploy, settings):
    settings.CRONIQ_TRIGGER_QUEUE_LIMIT = 1
    assert call(deploy).status_code == 202
    answer = call(deploy)
    assert (answer.status_code, answer["Retry-After"]) == (429, "5")
    assert len(runs()) == 1


class TestSigned:
    SECRET = "s3cret-for-hooks"

    @pytest.fixture
    def signed(self, writer, monkeypatch):
        monkeypatch.setenv("CRONIQ_SECRET_DEPLOY_HOOK", self.SECRET)
        job = {**DEPLOY, "webhook_secret": "${CRONIQ_SECRET_DEPLOY_HOOK}"}
        answer = writer.post("jobs", job)
        assert answer.status_code == 201, answer.content
        return answer.json()["webhook_url"]

    def test_only_a_call_signed_with_the_secret_runs_the_job(self, signed):
        body = json.dumps({"env": {"VERSION": "3"}}).encode()
        refused = [
            {},
            {"Croniq-Signature": "t=1,v1=00"},
            {"Croniq-Signature": sign("another secret", NOW, body)},
            {"Croniq-Signature": sign(self.SECRET, NOW - dt.timedelta(minutes=6), body)},
            {"Croniq-Signature": sign(self.SECRET, NOW, b'{"env": {"VERSION": "4"}}')},
        ]
        for headers in refused:
            answer = call(signed, body, **headers)
            assert answer.status_code == 401, headers
            assert answer.json()["detail"].startswith("Croniq-Signature missing or invalid")
        assert runs() == []

        answer = call(signed, body, **{"Croniq-Signature": sign(self.SECRET, NOW, body)})
        assert answer.status_code == 202
        assert runs() == [("deploy", "webhook", {"VERSION": "3"})]

    def test_a_bad_body_is_not_read_before_the_signature_is_checked(self, signed):
        answer = call(signed, {"env": {"NOT_A_PARAMETER": "x"}})
        assert answer.status_code == 401

    def test_a_secret_this_server_cannot_read_is_503_not_500(self, signed, monkeypatch):
        monkeypatch.delenv("CRONIQ_SECRET_DEPLOY_HOOK")
        assert call(signed).status_code == 503
        assert runs() == []


@pytest.mark.parametrize(
    ("secret", "detail"),
    [
        ("hunter2", "webhook_secret: not a secret reference"),
        # The secrets store's form: a name it does not hold.
        ("${secret:HOOK}", 'webhook_secret: secret "HOOK" does not exist'),
        ("${DATABASE_URL}", "webhook_secret: ${DATABASE_URL}: a channel reads only"),
    ],
)
def test_the_secret_is_a_reference_channels_may_read(writer, secret, detail):
    answer = writer.post("jobs", {**DEPLOY, "webhook_secret": secret})
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith(detail)
    assert not Job.objects.exists()
