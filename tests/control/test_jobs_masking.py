"""Secret-looking env values in `/api/v1/jobs`: masked for every key, as
the dashboard and the audit trail mask them, and never lost when a write
sends the masked form back (read-modify-write)."""

import datetime as dt

import pytest
import time_machine

from scheduler.models import Job
from tests.control.keyed_client import KeyedClient

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
MASK = "********"
SYNC = {
    "name": "billing-sync",
    "schedule": "@hourly",
    "command": "python sync.py",
    "env": {"DB_PASSWORD": "hunter2", "API_TOKEN": "tok-123", "REGION": "eu"},
}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def writer(client):
    answer = (writer := KeyedClient(client, ["jobs:read", "jobs:write"])).post("jobs", SYNC)
    assert answer.status_code == 201, answer.content
    return writer


def stored_env():
    return Job.objects.get(name="billing-sync").env


def test_a_reader_sees_secret_looking_values_masked(client, writer):
    reader = KeyedClient(client, ["jobs:read"], name="reader")

    listed = reader.get("jobs").json()["items"][0]["env"]
    one = reader.get("jobs/billing-sync").json()["env"]

    assert listed == one == {"DB_PASSWORD": MASK, "API_TOKEN": MASK, "REGION": "eu"}
    assert stored_env() == SYNC["env"]


def test_a_writers_answers_are_masked_too(writer):
    created = writer.get("jobs/billing-sync").json()
    changed = writer.patch("jobs/billing-sync", {"description": "nightly"}).json()
    paused = writer.post("jobs/billing-sync/pause").json()

    for job in (created, changed, paused):
        assert job["env"]["DB_PASSWORD"] == MASK


def test_sending_the_masked_job_back_keeps_the_secrets(writer):
    job = writer.get("jobs/billing-sync").json()
    env = {**job["env"], "REGION": "us"}

    answer = writer.patch("jobs/billing-sync", {"env": env, "description": "moved"})

    assert answer.status_code == 200, answer.content
    assert stored_env() == {"DB_PASSWORD": "hunter2", "API_TOKEN": "tok-123", "REGION": "us"}


def test_a_real_value_replaces_the_secret(writer):
    env = {"DB_PASSWORD": "correct horse", "API_TOKEN": MASK}

    answer = writer.patch("jobs/billing-sync", {"env": env})

    assert answer.status_code == 200, answer.content
    assert stored_env() == {"DB_PASSWORD": "correct horse", "API_TOKEN": "tok-123"}


def test_a_masked_value_with_nothing_stored_is_refused(writer):
    answer = writer.patch("jobs/billing-sync", {"env": {"NEW_SECRET": MASK}})
    created = writer.post("jobs", {**SYNC, "name": "copy", "env": {"DB_PASSWORD": MASK}})

    assert answer.status_code == created.status_code == 422
    assert answer.json()["detail"].startswith("env.NEW_SECRET: ")
    assert created.json()["detail"].startswith("env.DB_PASSWORD: ")
    assert stored_env() == SYNC["env"]
    assert not Job.objects.filter(name="copy").exists()


def test_a_mask_in_a_variable_not_named_like_a_secret_is_a_plain_value(writer):
    answer = writer.patch("jobs/billing-sync", {"env": {"REGION": MASK}})

    assert answer.status_code == 200, answer.content
    assert stored_env() == {"REGION": MASK}
