"""`GET /api/v1/forecast`: the capacity forecast per label set and the spans
over capacity, with keys that read jobs and runners; hours out of range are
refused naming the field."""

import datetime as dt

import pytest
import time_machine

from tests.control.keyed_client import KeyedClient
from tests.factories import JobFactory, RunnerFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(T0, tick=False):
        yield


@pytest.fixture
def reader(client):
    return KeyedClient(client, ["jobs:read", "runners:read"], name="planner")


def test_the_forecast_names_the_spans_over_capacity(reader):
    for i in range(3):
        JobFactory(name=f"report-{i}", schedule="0 2 * * *", labels=["linux"], timeout=900)
    RunnerFactory(name="one", labels=["linux", "docker"], capacity=2)
    answer = reader.get("forecast", hours=24)
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["start"], body["end"], body["bucket_seconds"]) == (
        "2026-06-01T12:00:00Z", "2026-06-02T12:00:00Z", 900,
    )  # fmt: skip
    (linux,) = body["label_sets"]
    assert (linux["labels"], linux["jobs"], linux["peak"]) == (["linux"], 3, 3.0)
    assert len(linux["demand"]) == 96 and linux["capacity"] == [2] * 96
    assert body["over_capacity"] == [
        {
            "start": "2026-06-02T02:00:00Z",
            "end": "2026-06-02T02:15:00Z",
            "labels": ["linux"],
            "peak": 3.0,
            "slots_needed": 3,
            "capacity": 2,
        }
    ]
    assert body["skipped"] == {}


def test_hours_out_of_range_are_refused_naming_the_field(reader):
    answer = reader.get("forecast", hours=0)
    assert answer.status_code == 422
    assert "hours" in answer.content.decode()
    assert reader.get("forecast", hours=73).status_code == 422


def test_a_key_that_reads_only_runners_is_refused(client):
    answer = KeyedClient(client, ["runners:read"]).get("forecast")
    assert answer.status_code == 403
    assert answer.json() == {"detail": "needs scope jobs:read"}


def test_the_forecast_shows_runs_that_wait_for_a_slot(reader):
    """Two 44-second runs due at once on a one-slot runner: the quarter
    hour's average is far below one run, but the second starts 44 s late."""
    for name in ("backup-a", "backup-b"):
        job = JobFactory(name=name, schedule="0 2 * * *", labels=["linux"], timeout=44)
    RunnerFactory(name="one", labels=["linux"], capacity=1)
    body = reader.get("forecast", hours=24).json()
    (linux,) = body["label_sets"]
    assert linux["peak"] < 1 and body["over_capacity"] == []
    two = 56  # 02:00, 14 hours after 12:00
    assert (linux["peak_at_once"], linux["runs_at_once"][two]) == (2, 2)
    assert (linux["longest_start_delay"], linux["start_delay"][two]) == (44.0, 44.0)
    assert linux["start_delay"][two - 1] == 0.0
    assert body["waits"] == [
        {
            "start": "2026-06-02T02:00:00Z",
            "end": "2026-06-02T02:15:00Z",
            "labels": ["linux"],
            "peak_at_once": 2,
            "capacity": 1,
            "start_delay": 44.0,
        }
    ]
    assert job.name == "backup-b"


def test_no_runner_for_the_labels_gives_no_delay_but_a_span(reader):
    JobFactory(name="gpu", schedule="0 2 * * *", labels=["gpu"], timeout=44)
    body = reader.get("forecast", hours=24).json()
    (gpu,) = body["label_sets"]
    assert gpu["longest_start_delay"] is None and gpu["start_delay"][56] is None
    assert body["waits"] == [] and len(body["over_capacity"]) == 1
