"""A job's limits through `/api/v1/jobs` (docs/design.md §8, §15): taken as
apply takes them (sizes as text or bytes), shown in bytes, refusals naming
the field, and a change of some fields leaving the limits as they are."""

import datetime as dt

import pytest
import time_machine

from scheduler.models import Job
from tests.control.keyed_client import KeyedClient

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
MIB = 1024 * 1024
REPORT = {
    "name": "report",
    "schedule": "@daily",
    "command": "python report.py",
    "max_output": "256KiB",
    "on_max_output": "fail",
    "max_memory": "64MiB",
    "max_cpu_seconds": 2,
    "success_exit_codes": [0, 3],
}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def writer(client):
    answer = (writer := KeyedClient(client, ["jobs:read", "jobs:write"])).post("jobs", REPORT)
    assert answer.status_code == 201, answer.content
    return writer


def test_the_api_takes_limits_as_apply_does_and_shows_them_in_bytes(client, writer):
    reader = KeyedClient(client, ["jobs:read"], name="reader")
    shown = reader.get("jobs/report").json()
    assert {key: shown[key] for key in REPORT if key not in ("name", "schedule", "command")} == {
        "max_output": 256 * 1024,
        "on_max_output": "fail",
        "max_memory": 64 * MIB,
        "max_cpu_seconds": 2,
        "success_exit_codes": [0, 3],
    }


def test_a_job_without_limits_shows_none(client):
    api = KeyedClient(client, ["jobs:read", "jobs:write"])
    shown = api.post("jobs", {"name": "plain", "schedule": "@daily", "command": "true"}).json()
    assert (shown["max_output"], shown["max_memory"], shown["max_cpu_seconds"]) == (None,) * 3
    assert (shown["on_max_output"], shown["success_exit_codes"]) == ("truncate", [])


def test_a_change_of_other_fields_keeps_the_limits(writer):
    answer = writer.patch("jobs/report", {"retries": 2})
    assert answer.status_code == 200, answer.content
    job = Job.objects.get(name="report")
    assert (job.max_output, job.max_memory) == (256 * 1024, 64 * MIB)
    assert job.success_exit_codes == [0, 3]
    answer = writer.patch("jobs/report", {"max_memory": "1GiB", "max_cpu_seconds": None})
    assert answer.status_code == 200, answer.content
    assert (answer.json()["max_memory"], answer.json()["max_cpu_seconds"]) == (1024 * MIB, None)


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"max_memory": "64MB"}, "max_memory: '64MB' is not a size: units are binary, write "
         "64MiB (64 x 1048576 bytes)"),
        ({"max_output": 12}, "max_output: from 1 KiB to 1 GiB, got 12 bytes (12)"),
        ({"max_cpu_seconds": -1}, "max_cpu_seconds: must be at least 1 second(s), got -1"),
        ({"success_exit_codes": [0, "x"]}, "success_exit_codes[1]: 'x' is not an exit code "
         "(0-255)"),
        ({"kind": "http", "command": "", "http": {"url": "https://example.com/"}},
         "max_memory: only with kind: shell (an http job starts no process)"),
    ],
)  # fmt: skip
def test_the_api_refuses_a_bad_limit_naming_the_field(writer, change, detail):
    answer = writer.patch("jobs/report", change)
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith(detail), answer.json()
    assert Job.objects.get(name="report").max_memory == 64 * MIB
