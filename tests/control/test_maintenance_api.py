"""`GET/PUT /api/v1/maintenance`: the switch and the windows not yet ended,
set with an admin key, audited with the key as actor; a window that ends
before it starts is refused naming the field, and nothing changes."""

import datetime as dt

import pytest
import time_machine

from audit.models import AuditEvent
from control import examples
from scheduler.models import MaintenanceSwitch, MaintenanceWindow
from tests.control.keyed_client import KeyedClient

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
WINDOW = {
    "start": "2026-06-01T13:00:00Z",
    "end": "2026-06-01T15:00:00Z",
    "labels": ["gpu"],
    "reason": "drivers",
}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(T0, tick=False):
        yield


@pytest.fixture
def admin(client):
    return KeyedClient(client, ["admin"], name="ops")


def test_a_new_install_is_not_in_maintenance(admin):
    answer = admin.get("maintenance")
    assert answer.status_code == 200
    assert answer.json() == {
        "active": False,
        "on": False,
        "reason": "",
        "changed_at": None,
        "windows": [],
    }


def test_put_turns_the_switch_on_audited_with_the_key(admin):
    answer = admin.put("maintenance", {"on": True, "reason": "db upgrade"})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["active"], body["on"], body["reason"]) == (True, True, "db upgrade")
    event = AuditEvent.objects.get(action="maintenance.on")
    assert (event.actor_kind, event.actor_name) == ("api_key", "ops")


def test_put_sets_the_windows_and_again_changes_nothing(admin):
    first = admin.put("maintenance", {"windows": [WINDOW]})
    assert first.status_code == 200, first.content
    [window] = first.json()["windows"]
    assert (window["labels"], window["reason"], window["active"]) == (["gpu"], "drivers", False)
    assert first.json()["active"] is False
    again = admin.put("maintenance", {"windows": [WINDOW]})
    assert again.json()["windows"][0]["id"] == window["id"]
    assert AuditEvent.objects.filter(action__startswith="maintenance.").count() == 1
    cleared = admin.put("maintenance", {"windows": []})
    assert cleared.json()["windows"] == []
    assert AuditEvent.objects.filter(action="maintenance.window_deleted").count() == 1


def test_a_window_ending_before_it_starts_is_refused_naming_the_field(admin):
    bad = {**WINDOW, "end": "2026-06-01T12:30:00Z"}
    answer = admin.put("maintenance", {"on": True, "windows": [WINDOW, bad]})
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith("windows[1].end: ")
    assert not MaintenanceWindow.objects.exists()
    assert not MaintenanceSwitch.objects.filter(on=True).exists()
    assert not AuditEvent.objects.exists()


def test_a_window_with_an_offset_postgresql_cannot_hold_is_stored_in_utc(admin):
    late = {**WINDOW, "start": "2026-06-02T05:00:00+16:00", "end": "2026-06-02T07:00:00+16:00"}
    answer = admin.put("maintenance", {"windows": [late]})
    assert answer.status_code == 200, answer.content
    assert MaintenanceWindow.objects.get().start == dt.datetime(2026, 6, 1, 13, tzinfo=dt.UTC)


def test_a_window_without_an_offset_is_read_in_utc(admin):
    answer = admin.put("maintenance", {"windows": [{**WINDOW, "start": "2026-06-01T13:00"}]})
    assert answer.status_code == 200, answer.content
    assert MaintenanceWindow.objects.get().start == dt.datetime(2026, 6, 1, 13, tzinfo=dt.UTC)
    assert answer.json()["windows"][0]["start"] == "2026-06-01T13:00:00Z"


def test_setting_maintenance_needs_the_admin_scope(client):
    reader = KeyedClient(client, ["runners:read", "runners:write"], name="reader")
    assert reader.get("maintenance").status_code == 200
    answer = reader.put("maintenance", {"on": True})
    assert answer.status_code == 403
    assert not MaintenanceSwitch.objects.filter(on=True).exists()


def test_the_example_is_taken(admin):
    answer = admin.put("maintenance", examples.MAINTENANCE)
    assert answer.status_code == 200, answer.content
    assert len(answer.json()["windows"]) == 1


def test_a_window_already_ended_is_refused_naming_the_field_and_changes_nothing(admin):
    """Only windows not yet ended are compared with the stored ones: an
    ended one was stored again by each identical PUT."""
    ended = {**WINDOW, "start": "2026-06-01T09:00:00Z", "end": "2026-06-01T12:00:00Z"}
    for _ in range(3):
        answer = admin.put("maintenance", {"windows": [WINDOW, ended]})
        assert answer.status_code == 422, answer.content
        assert answer.json()["detail"] == (
            "windows[1].end: 2026-06-01T12:00:00+00:00 is already past; a window must end after now"
        )
    assert not MaintenanceWindow.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_window_put_back_just_after_it_ended_is_left_as_stored(admin):
    """A client reads the windows and puts them back; one ended in between."""
    ending = {**WINDOW, "start": "2026-06-01T11:00:00Z", "end": "2026-06-01T12:30:00Z"}
    assert admin.put("maintenance", {"windows": [ending, WINDOW]}).status_code == 200
    with time_machine.travel(dt.datetime(2026, 6, 1, 13, 0, tzinfo=dt.UTC), tick=False):
        for _ in range(3):
            answer = admin.put("maintenance", {"windows": [ending, WINDOW]})
            assert answer.status_code == 200, answer.content
            assert [w["end"] for w in answer.json()["windows"]] == ["2026-06-01T15:00:00Z"]
    assert MaintenanceWindow.objects.count() == 2
    assert AuditEvent.objects.filter(action__startswith="maintenance.").count() == 2


def test_a_window_already_started_is_taken_once(admin):
    started = {**WINDOW, "start": "2026-06-01T11:00:00Z"}
    for _ in range(3):
        answer = admin.put("maintenance", {"windows": [started]})
        assert answer.status_code == 200, answer.content
        assert answer.json()["windows"][0]["active"] is True
    assert MaintenanceWindow.objects.count() == 1
    assert AuditEvent.objects.filter(action__startswith="maintenance.").count() == 1
