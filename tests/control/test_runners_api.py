"""Runners over the management API: listed with their running count; drained,
resumed and forgotten as in the admin, audited with the key as actor."""

from datetime import UTC, datetime

import pytest

from audit.models import AuditEvent
from runners.models import Runner
from scheduler.models import Execution
from tests.control.calls import call, changed, fingerprint, key
from tests.factories import ExecutionFactory, RunnerFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def writer():
    return key("ops", ["runners:read", "runners:write"])[1]


def test_runners_are_listed_by_id_with_what_they_run(client, writer):
    busy = RunnerFactory(
        name="web-1", labels=["linux"], capacity=4, hostname="h1", features=["stdin", "http"]
    )
    RunnerFactory(name="web-2", state=Runner.OFFLINE)
    for state in (Execution.RUNNING, Execution.RUNNING, Execution.SUCCEEDED):
        ExecutionFactory(runner=busy, state=state)

    first = call(client, "get", "/api/v1/runners?limit=1", writer).json()
    rest = call(client, "get", f"/api/v1/runners?cursor={first['next_cursor']}", writer).json()

    [web1], [web2] = first["items"], rest["items"]
    assert web1 == {
        "id": busy.pk, "name": "web-1", "labels": ["linux"], "state": "online",
        "drained": False, "flapping": False, "version": "", "hostname": "h1", "capacity": 4,
        "features": ["stdin", "http"],
        "registered_at": web1["registered_at"], "last_seen_at": web1["last_seen_at"],
        "running": 2,
    }  # fmt: skip
    assert (web2["name"], web2["running"], rest["next_cursor"]) == ("web-2", 0, None)


def test_runners_are_filtered_by_state(client, writer):
    RunnerFactory(name="web-1")
    RunnerFactory(name="web-2", state=Runner.OFFLINE)
    answer = call(client, "get", "/api/v1/runners?state=offline", writer).json()
    assert [r["name"] for r in answer["items"]] == ["web-2"]
    assert call(client, "get", "/api/v1/runners?state=gone", writer).status_code == 422


def test_drain_then_resume_a_runner(client, writer):
    runner = RunnerFactory(name="web-1")

    drained = call(client, "post", f"/api/v1/runners/{runner.pk}/drain", writer)
    resumed = call(client, "post", f"/api/v1/runners/{runner.pk}/resume", writer)

    assert drained.status_code == 200
    assert (drained.json()["state"], drained.json()["drained"]) == ("draining", True)
    assert (resumed.json()["state"], resumed.json()["drained"]) == ("online", False)
    events = AuditEvent.objects.order_by("id").values_list("action", "actor_kind", "actor_name")
    assert list(events) == [
        ("runner.drained", "api_key", "ops"),
        ("runner.resumed", "api_key", "ops"),
    ]


def test_draining_twice_changes_nothing_the_second_time(client, writer):
    runner = RunnerFactory(name="web-1", state=Runner.DRAINING, drained=True)
    before = fingerprint()
    answer = call(client, "post", f"/api/v1/runners/{runner.pk}/drain", writer)
    assert answer.status_code == 200 and answer.json()["state"] == "draining"
    assert set(changed(before, fingerprint())) <= {"control.ApiKey"}  # its last_used_at


def test_forget_releases_its_executions_and_deletes_it(client, writer):
    runner = RunnerFactory(name="web-1")
    held = ExecutionFactory(runner=runner, state=Execution.RUNNING, lease=7, session="s")

    answer = call(client, "post", f"/api/v1/runners/{runner.pk}/forget", writer)

    assert answer.status_code == 200
    assert answer.json() == {"name": "web-1", "released": [held.pk]}
    assert not Runner.objects.exists()
    event = AuditEvent.objects.get(action="runner.forgotten")
    assert (event.actor_kind, event.actor_name) == ("api_key", "ops")


@pytest.mark.parametrize("runner_id", ["0", "999", str(2**63), "-1"])
@pytest.mark.parametrize("verb", ["drain", "resume", "forget"])
def test_an_unknown_runner_is_404(client, writer, runner_id, verb):
    answer = call(client, "post", f"/api/v1/runners/{runner_id}/{verb}", writer)
    assert answer.status_code == 404
    assert answer.json() == {"detail": f"no runner {runner_id}"}
