"""`/api/v1/calendars` (docs/design.md §8): the apply file's calendar fields,
PUT creates or replaces, and a preview of the allowed time."""

import datetime as dt

import pytest
import time_machine

from audit.models import AuditEvent
from calendars.models import Calendar
from scheduler.models import Job
from tests.control.keyed_client import KeyedClient

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)  # a Tuesday
OFFICE = {
    "timezone": "Europe/Berlin",
    "weekdays": ["mon", "tue", "wed", "thu", "fri"],
    "holidays": {"country": "DE", "subdivision": "BY"},
    "daily_window": {"start": "06:00", "end": "22:00"},
    "exclude": [{"start": "2026-12-24", "end": "2027-01-06", "label": "Christmas freeze"}],
}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def api(client):
    return KeyedClient(client, ["calendars:read", "calendars:write"])


def stored():
    return list(Calendar.objects.values()), list(Calendar.objects.values("periods"))


def test_put_creates_a_calendar_that_reads_back_as_the_apply_file_says_it(api):
    answer = api.put("calendars/office", OFFICE)

    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "name": "office",
        "project": "default",
        "description": "",
        "timezone": "Europe/Berlin",
        "weekdays": ["mon", "tue", "wed", "thu", "fri"],
        "holidays": {"country": "DE", "subdivision": "BY", "categories": []},
        "daily_window": {"start": "06:00", "end": "22:00"},
        "exclude": [{"start": "2026-12-24", "end": "2027-01-06", "label": "Christmas freeze"}],
        "include": [],
        "base": None,
        "managed_by": "api",
        "managed_source": "",
    }
    assert api.get("calendars/office").json() == answer.json()
    event = AuditEvent.objects.get(action="calendar.created")
    assert (event.actor_name, event.data["via"]) == ("deploy", "api")


def test_what_get_shows_can_be_put_back_unchanged(api):
    shown = api.put("calendars/office", OFFICE).json()

    assert api.put("calendars/office", shown).json() == shown
    assert not AuditEvent.objects.filter(action="calendar.changed").exists()


def test_put_replaces_the_calendar_and_moves_the_jobs_on_it(api, client):
    api.put("calendars/office", {"weekdays": ["mon"]})
    jobs = KeyedClient(client, ["jobs:write"], name="jobs")
    jobs.post("jobs", {"name": "weekly", "schedule": "0 9 * * *", "command": "true",
                       "calendar": "office"})  # fmt: skip
    assert Job.objects.get().next_run_at == dt.datetime(2026, 12, 7, 9, tzinfo=dt.UTC)

    answer = api.put("calendars/office", {"weekdays": ["wed"], "description": "midweek"})

    assert answer.json()["weekdays"] == ["wed"] and answer.json()["description"] == "midweek"
    assert Job.objects.get().next_run_at == dt.datetime(2026, 12, 2, 9, tzinfo=dt.UTC)
    assert set(AuditEvent.objects.get(action="calendar.changed").data["diff"]) == {
        "weekdays",
        "description",
    }


@pytest.mark.parametrize(
    ("item", "detail"),
    [
        ({"weekdays": ["someday"]}, "weekdays: "),
        ({"timezone": "Mars/Olympus"}, "timezone: "),
        (
            {"exclude": [{"start": "2026-12-24T10:00", "end": "2026-12-24T12:00"}]},
            "exclude[0].start: ",
        ),
        ({"daily_window": {"start": "6am", "end": "22:00"}}, "daily_window.start: "),
        # Named as the request writes them, not as the model stores them.
        ({"holidays": {"country": "XX"}}, "holidays.country: "),
        ({"holidays": {"country": "DE", "subdivision": "ZZ"}}, "holidays.subdivision: "),
        ({"daily_window": {"start": "06:00", "end": "06:00"}}, "daily_window.end: "),
        ({"base": "nowhere"}, "base: no calendar named 'nowhere'"),
        ({"name": "other"}, "name: must be the name in the path"),
        ({"colour": "red"}, "unknown field(s): colour"),
    ],
)
def test_a_refused_put_is_422_naming_the_field_and_changes_nothing(api, item, detail):
    api.put("calendars/office", OFFICE)
    before = stored()

    answer = api.put("calendars/office", item)

    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"].startswith(detail)
    assert stored() == before


def test_calendars_are_listed_by_name(api):
    for name in ("b", "a", "c"):
        api.put(f"calendars/{name}", {})
    page = api.get("calendars", limit=2).json()
    rest = api.get("calendars", limit=2, cursor=page["next_cursor"]).json()
    assert [c["name"] for c in page["items"] + rest["items"]] == ["a", "b", "c"]
    assert api.get("calendars/nope").status_code == 404


def test_preview_lists_the_allowed_stretches_cut_to_the_range(api):
    api.put("calendars/office", {"weekdays": ["mon", "tue", "wed", "thu", "fri"],
                                  "daily_window": {"start": "09:00", "end": "17:00"}})  # fmt: skip

    answer = api.get("calendars/office/preview", start="2026-12-04T12:00:00Z",
                     end="2026-12-08T10:00:00Z")  # fmt: skip

    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "allowed": [
            {"start": "2026-12-04T12:00:00Z", "end": "2026-12-04T17:00:00Z"},
            {"start": "2026-12-07T09:00:00Z", "end": "2026-12-07T17:00:00Z"},
            {"start": "2026-12-08T09:00:00Z", "end": "2026-12-08T10:00:00Z"},
        ]
    }


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ({"start": "2026-12-08T00:00:00Z", "end": "2026-12-04T00:00:00Z"}, "end: must be after"),
        ({"start": "2026-12-08T00:00:00Z", "end": "2026-12-08T00:00:00Z"}, "end: must be after"),
        ({"start": "2026-01-01T00:00:00Z", "end": "2027-01-03T00:00:00Z"}, "end: at most 366"),
    ],
)
def test_preview_refuses_a_reversed_or_too_long_range(api, query, detail):
    api.put("calendars/office", {})
    answer = api.get("calendars/office/preview", **query)
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith(detail)


def test_a_reader_may_not_put(client):
    reader = KeyedClient(client, ["calendars:read"], name="reader")
    answer = reader.put("calendars/office", OFFICE)
    assert (answer.status_code, answer.json()) == (403, {"detail": "needs scope calendars:write"})
    assert not Calendar.objects.exists()
