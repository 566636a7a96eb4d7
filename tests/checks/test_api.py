"""`/api/v1/checks` (docs/design.md §12): the fields plus ping_url, state,
last_ping_at and next_expected_at; checks:read and checks:write; errors
that name the field; apply-managed checks changed only when adopted."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from audit.models import AuditEvent
from checks import pings, states
from checks.models import Check
from core.ownership import ManagedBy
from tests.checks.factories import CheckFactory
from tests.control.calls import call, key

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def frozen(settings):
    settings.CRONIQ_PUBLIC_URL = "https://croniq.example.com"
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def writer():
    return key("writer", ["checks:write", "checks:read"])[1]


@pytest.fixture
def reader():
    return key("reader", ["checks:read"])[1]


def api(client, method, path, authorization, body=None):
    return call(client, method, f"/api/v1/{path}", authorization, body)


def test_a_check_is_created_and_read_back_with_its_ping_url(client, writer, reader):
    answer = api(
        client,
        "post",
        "checks",
        writer,
        {"name": "backup", "period": "1h", "grace": "5m", "labels": ["db"], "description": "n"},
    )
    assert answer.status_code == 201, answer.content
    check = Check.objects.get(name="backup")
    assert answer.json() == {
        "name": "backup",
        "project": "default",
        "description": "n",
        "labels": ["db"],
        "schedule": None,
        "timezone": "UTC",
        "period": 3600,
        "grace": 300,
        "ping_url": f"https://croniq.example.com/ping/{check.token}",
        "state": "new",
        "last_ping_at": None,
        "next_expected_at": None,
        "managed_by": "api",
        "managed_source": "",
    }
    assert len(check.token) >= 43
    assert AuditEvent.objects.get(action="check.created").actor_kind == "api_key"
    read = api(client, "get", "checks/backup", reader)
    assert read.json() == answer.json()


def test_a_cron_check_defaults_its_grace_and_shows_when_the_next_ping_is_due(client, writer):
    answer = api(
        client,
        "post",
        "checks",
        writer,
        {"name": "nightly", "schedule": "30 2 * * *", "timezone": "Europe/Berlin"},
    )
    assert answer.status_code == 201, answer.content
    assert (answer.json()["grace"], answer.json()["schedule"]) == (60, "30 2 * * *")
    check = Check.objects.get(name="nightly")
    pings.record(pings.Received(token=check.token, kind=states.SUCCESS, at=NOW))
    body = api(client, "get", "checks/nightly", writer).json()
    assert body["state"] == "up"
    assert body["last_ping_at"] == "2026-06-01T12:00:00Z"
    assert body["next_expected_at"] == "2026-06-02T00:30:00Z"  # 02:30 CEST


@pytest.mark.parametrize(
    "item, error",
    [
        ({"name": "x"}, "schedule: give either a schedule (cron or a macro) or a period"),
        ({"name": "x", "period": 60, "schedule": "@daily"}, "not both"),
        ({"name": "x", "schedule": "61 * * * *"}, "schedule: "),
        ({"name": "x", "schedule": "@every 5m"}, "give the check a period instead"),
        ({"name": "x", "schedule": "0 0 30 2 *"}, "schedule: never fires"),
        ({"name": "x", "period": "soon"}, "period: 'soon' is not a duration"),
        ({"name": "x", "period": 0}, "period: must be at least 1"),
        ({"name": "x", "period": 60, "grace": -1}, "grace: must be at least 0"),
        ({"name": "x", "period": 10**9}, "period: at most"),
        ({"name": "x", "period": 60, "timezone": "Mars/Olympus"}, "timezone: 'Mars/Olympus'"),
        ({"name": "not a name", "period": 60}, "name: 'not a name' is not a name"),
        ({"period": 60}, "name: required"),
        ({"name": "x", "period": 60, "project": "other"}, "project: no project named 'other'"),
        ({"name": "x", "period": 60, "labels": "db"}, "labels: expected a list"),
        ({"name": "x", "period": 60, "colour": "red"}, "colour: unknown field"),
        ({"name": "x", "period": 60, "description": "a\x00b"}, "description: must not contain"),
    ],
)
def test_bad_items_are_refused_naming_the_field(client, writer, item, error):
    answer = api(client, "post", "checks", writer, item)
    assert answer.status_code == 422, answer.content
    assert error in answer.json()["detail"]
    assert not Check.objects.exists()


def test_a_taken_name_is_a_conflict(client, writer):
    CheckFactory(name="backup")
    answer = api(client, "post", "checks", writer, {"name": "backup", "period": 60})
    assert answer.status_code == 409
    assert answer.json() == {"detail": "a check named 'backup' already exists"}


def test_scopes(client, reader):
    assert api(client, "post", "checks", reader, {"name": "x", "period": 60}).status_code == 403
    jobs_only = key("jobs", ["jobs:read"])[1]
    assert api(client, "get", "checks", jobs_only).status_code == 403
    assert api(client, "get", "checks", None).status_code == 401


def test_the_list_pages_by_name_and_filters_by_state(client, reader):
    for name in ("c", "a", "b"):
        CheckFactory(name=name)
    CheckFactory(name="d", state="down")
    first = api(client, "get", "checks?limit=2", reader).json()
    assert [c["name"] for c in first["items"]] == ["a", "b"]
    rest = api(client, "get", f"checks?limit=2&cursor={first['next_cursor']}", reader).json()
    assert ([c["name"] for c in rest["items"]], rest["next_cursor"]) == (["c", "d"], None)
    down = api(client, "get", "checks?state=down", reader).json()
    assert [c["name"] for c in down["items"]] == ["d"]


def test_a_longer_period_moves_the_deadlines_of_an_up_check(client, writer):
    check = CheckFactory(name="backup", period=3600, grace=60)
    pings.record(pings.Received(token=check.token, kind=states.SUCCESS, at=NOW))
    answer = api(client, "patch", "checks/backup", writer, {"period": "2h"})
    assert answer.status_code == 200, answer.content
    assert answer.json()["next_expected_at"] == "2026-06-01T14:00:00Z"
    check.refresh_from_db()
    assert (check.period, check.down_at) == (7200, NOW + timedelta(hours=2, minutes=1))
    assert check.n_pings == 1  # the ping's bookkeeping is left as it was
    event = AuditEvent.objects.get(action="check.changed")
    assert event.data["diff"] == {"period": [3600, 7200]}


def test_a_patch_may_swap_the_period_for_a_schedule(client, writer):
    CheckFactory(name="backup", period=3600)
    answer = api(client, "patch", "checks/backup", writer, {"period": None, "schedule": "@daily"})
    assert answer.status_code == 200, answer.content
    assert (answer.json()["schedule"], answer.json()["period"]) == ("@daily", None)


def test_pausing_and_resuming(client, writer):
    check = CheckFactory(name="backup")
    pings.record(pings.Received(token=check.token, kind=states.SUCCESS, at=NOW))
    paused = api(client, "patch", "checks/backup", writer, {"paused": True}).json()
    assert (paused["state"], paused["next_expected_at"]) == ("paused", None)
    resumed = api(client, "patch", "checks/backup", writer, {"paused": False}).json()
    assert resumed["state"] == "new"  # waits for its next ping
    assert api(client, "patch", "checks/backup", writer, {"paused": "yes"}).status_code == 422


def test_a_check_cannot_be_renamed(client, writer):
    CheckFactory(name="backup")
    answer = api(client, "patch", "checks/backup", writer, {"name": "other"})
    assert answer.status_code == 422
    assert "cannot be renamed" in answer.json()["detail"]


def test_unknown_checks_are_not_found(client, writer):
    assert api(client, "get", "checks/nope", writer).status_code == 404
    assert api(client, "patch", "checks/nope", writer, {}).status_code == 404
    assert api(client, "delete", "checks/nope", writer).status_code == 404


def test_an_apply_managed_check_is_changed_only_when_adopted(client, writer):
    CheckFactory(name="backup", managed_by=ManagedBy.APPLY, managed_source="croniq")
    refused = api(client, "patch", "checks/backup", writer, {"grace": 120})
    assert refused.status_code == 409
    assert "pass adopt" in refused.json()["detail"]
    adopted = api(client, "patch", "checks/backup", writer, {"grace": 120, "adopt": True})
    assert adopted.status_code == 200
    assert (adopted.json()["managed_by"], adopted.json()["grace"]) == ("api", 120)
    assert AuditEvent.objects.filter(action="check.adopted").count() == 1


def test_delete_removes_the_check_and_its_pings(client, writer):
    check = CheckFactory(name="backup")
    pings.record(pings.Received(token=check.token, kind=states.SUCCESS, at=NOW))
    assert api(client, "delete", "checks/backup", writer).status_code == 204
    assert not Check.objects.exists()
    assert AuditEvent.objects.get(action="check.deleted").data["name"] == "backup"
    # Its token pings nothing any more.
    assert client.get(f"/ping/{check.token}").status_code == 404
