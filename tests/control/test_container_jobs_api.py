"""Jobs of kind container through `/api/v1/jobs` (docs/design.md §8, §15):
the container checked as apply checks it, refusals naming the field, its
env's values named like secrets masked in every answer and kept when a
write sends the mask back."""

import datetime as dt

import pytest
import time_machine

from scheduler.models import Job
from tests.control.keyed_client import KeyedClient

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
MASK = "********"
IMAGE = "registry.example.com/data/reports:1.4"
RENDER = {
    "name": "render",
    "schedule": "@daily",
    "kind": "container",
    "container": {
        "image": IMAGE,
        "args": ["python", "render.py"],
        "env": {"DB_PASSWORD": "plain-credential", "REGION": "eu"},
        "pull": "never",
    },
}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def writer(client):
    answer = (writer := KeyedClient(client, ["jobs:read", "jobs:write"])).post("jobs", RENDER)
    assert answer.status_code == 201, answer.content
    return writer


def stored():
    return Job.objects.get(name="render").container


def test_the_api_shows_the_kind_and_the_container_its_secret_env_masked(client, writer):
    reader = KeyedClient(client, ["jobs:read"], name="reader")
    shown = reader.get("jobs/render").json()
    assert (shown["kind"], shown["command"], shown["http"]) == ("container", "", None)
    assert shown["container"] == {
        "image": IMAGE,
        "args": ["python", "render.py"],
        "env": {"DB_PASSWORD": MASK, "REGION": "eu"},
        "pull": "never",
        "network": None,
    }
    assert reader.get("jobs").json()["items"][0]["container"]["env"]["DB_PASSWORD"] == MASK
    assert stored()["env"]["DB_PASSWORD"] == "plain-credential"


def test_a_shell_job_shows_no_container(client):
    api = KeyedClient(client, ["jobs:read", "jobs:write"])
    shown = api.post("jobs", {"name": "report", "schedule": "@daily", "command": "true"}).json()
    assert (shown["kind"], shown["container"]) == ("shell", None)


def test_sending_the_masked_container_back_keeps_the_secret(writer):
    container = writer.get("jobs/render").json()["container"]
    answer = writer.patch("jobs/render", {"container": {**container, "network": "none"}})
    assert answer.status_code == 200, answer.content
    assert stored()["env"]["DB_PASSWORD"] == "plain-credential"
    assert stored()["network"] == "none"


def test_a_masked_env_value_with_nothing_stored_is_refused(writer):
    container = {"image": IMAGE, "env": {"API_TOKEN": MASK}}
    answer = writer.patch("jobs/render", {"container": container})
    created = writer.post("jobs", {**RENDER, "name": "copy", "container": container})
    assert answer.status_code == created.status_code == 422
    assert answer.json()["detail"].startswith("container.env.API_TOKEN: ")
    assert created.json()["detail"].startswith("container.env.API_TOKEN: ")
    assert not Job.objects.filter(name="copy").exists()


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"container": {"image": "--privileged"}}, "container.image: '--privileged' is not an"),
        ({"container": {"image": IMAGE, "pull": "weekly"}}, "container.pull: 'weekly' is not"),
        ({"container": {"image": IMAGE, "network": "lan"}}, "container.network: 'lan' is not"),
        ({"container": {"image": IMAGE, "env": {"A": "1\n2"}}}, "container.env.A: a value is"),
        ({"container": {"image": IMAGE, "args": [True]}}, "container.args[0]: expected text"),
        ({"container": {"image": IMAGE, "ports": ["80:80"]}}, "container: unknown field(s)"),
        ({"env": {"A": "1"}}, "env: only with kind: shell (a container job runs its image"),
        ({"kind": "shell"}, "container: only with kind: container; command: required"),
    ],
)
def test_the_api_refuses_a_bad_container_naming_the_field(writer, change, detail):
    answer = writer.patch("jobs/render", change)
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith(detail), answer.json()


def test_the_api_turns_a_container_job_into_a_shell_job_and_back(writer):
    answer = writer.patch("jobs/render", {"kind": "shell", "command": "true", "container": None})
    assert answer.status_code == 200, answer.content
    assert (answer.json()["kind"], answer.json()["container"]) == ("shell", None)
    back = writer.patch(
        "jobs/render", {"kind": "container", "command": "", "container": {"image": IMAGE}}
    )
    assert back.status_code == 200, back.content
    assert back.json()["container"]["image"] == IMAGE
