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
