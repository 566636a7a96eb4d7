"""Jobs of kind http through `/api/v1/jobs` (docs/design.md §8, §15): the
request checked as apply checks it, refusals naming the field, headers
named like secrets masked in every answer and kept when a write sends the
mask back."""

import datetime as dt

import pytest
import time_machine

from scheduler.models import Job
from tests.control.keyed_client import KeyedClient
from vault import store

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
MASK = "********"
URL = "https://hooks.example.com/refresh"
REFRESH = {
    "name": "refresh",
    "schedule": "@hourly",
    "kind": "http",
    "http": {
        "method": "POST",
        "url": URL,
        "headers": {"Authorization": "Bearer plain-credential", "X-Team": "data"},
        "expect_status": [204],
    },
}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def writer(client):
    answer = (writer := KeyedClient(client, ["jobs:read", "jobs:write"])).post("jobs", REFRESH)
    assert answer.status_code == 201, answer.content
    return writer


def stored():
    return Job.objects.get(name="refresh").http


def test_the_api_shows_the_kind_and_the_request_its_secret_header_masked(client, writer):
    reader = KeyedClient(client, ["jobs:read"], name="reader")
    shown = reader.get("jobs/refresh").json()
    assert (shown["kind"], shown["command"]) == ("http", "")
    assert shown["http"] == {
        "method": "POST",
        "url": URL,
        "headers": {"Authorization": MASK, "X-Team": "data"},
        "body": "",
        "expect_status": [204],
        "timeout": None,
    }
    assert reader.get("jobs").json()["items"][0]["http"]["headers"]["Authorization"] == MASK
    assert stored()["headers"]["Authorization"] == "Bearer plain-credential"


def test_a_shell_job_shows_no_request(client):
    api = KeyedClient(client, ["jobs:read", "jobs:write"])
    shown = api.post("jobs", {"name": "report", "schedule": "@daily", "command": "true"}).json()
    assert (shown["kind"], shown["http"]) == ("shell", None)


def test_sending_the_masked_request_back_keeps_the_header(writer):
    request = writer.get("jobs/refresh").json()["http"]
    answer = writer.patch("jobs/refresh", {"http": {**request, "body": "go"}})
    assert answer.status_code == 200, answer.content
    assert stored()["headers"]["Authorization"] == "Bearer plain-credential"
    assert stored()["body"] == "go"


def test_a_masked_header_with_nothing_stored_is_refused(writer):
    request = {"url": URL, "headers": {"X-Api-Key": MASK}}
    answer = writer.patch("jobs/refresh", {"http": request})
    created = writer.post("jobs", {**REFRESH, "name": "copy", "http": request})
    assert answer.status_code == created.status_code == 422
    assert answer.json()["detail"].startswith("http.headers.X-Api-Key: ")
    assert created.json()["detail"].startswith("http.headers.X-Api-Key: ")
    assert not Job.objects.filter(name="copy").exists()


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"http": {"url": "mailto:ops@example.com"}}, "http.url: 'mailto:ops@example.com' is"),
        ({"http": {"url": URL, "method": "BREW"}}, "http.method: 'BREW' is not one of"),
        ({"http": {"url": URL, "expect_status": ["2xx"]}}, "http.expect_status[0]: '2xx' is"),
        ({"command": "curl x"}, "command: only with kind: shell"),
        ({"kind": "shell"}, "http: only with kind: http; command: required: the shell command"),
    ],
)
def test_the_api_refuses_a_bad_request_naming_the_field(writer, change, detail):
    answer = writer.patch("jobs/refresh", change)
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith(detail), answer.json()


def test_the_api_turns_an_http_job_into_a_shell_job_and_back(writer):
    answer = writer.patch("jobs/refresh", {"kind": "shell", "command": "true", "http": None})
    assert answer.status_code == 200, answer.content
    assert (answer.json()["kind"], answer.json()["http"]) == ("shell", None)
    back = writer.patch("jobs/refresh", {"kind": "http", "command": "", "http": {"url": URL}})
    assert back.status_code == 200, back.content
    assert back.json()["http"]["url"] == URL


def test_a_header_naming_a_stored_secret_is_shown_as_its_reference(writer):
    store.put("api-token", "t-5678-resolved", actor=None, now=NOW)
    headers = {"Authorization": "Bearer ${secret:api-token}", "Cookie": "${secret:api-token}"}
    answer = writer.patch("jobs/refresh", {"http": {"url": URL, "headers": headers}})
    assert answer.status_code == 200, answer.content
    assert answer.json()["http"]["headers"] == headers
    # A literal before the reference that is no scheme may be a secret: masked.
    mixed = {"Authorization": "s3cr3t/x ${secret:api-token}"}
    answer = writer.patch("jobs/refresh", {"http": {"url": URL, "headers": mixed}})
    assert answer.json()["http"]["headers"] == {"Authorization": MASK}
