"""The calendar preview's `start` and `end` near the ends of time: a 422
naming the field, never an overflow's 500."""

import pytest

from calendars.models import Calendar, CalendarPeriod
from tests.control.keyed_client import KeyedClient
from tests.factories import CalendarFactory

pytestmark = pytest.mark.django_db

OUT_OF_RANGE = "must lie between the years 1970 and 9000"


@pytest.fixture
def api(client):
    CalendarFactory(name="office", weekdays=["mon", "tue", "wed", "thu", "fri"])
    return KeyedClient(client, ["calendars:read"])


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        # The default end (30 days on) would lie past datetime.max.
        ({"start": "9999-12-31T00:00:00Z"}, f"start: {OUT_OF_RANGE}"),
        ({"start": "0001-01-01T00:00:00+05:00"}, f"start: {OUT_OF_RANGE}"),
        ({"start": "0001-01-01T00:00:00Z"}, f"start: {OUT_OF_RANGE}"),
        (
            {"start": "2026-12-01T00:00:00Z", "end": "9999-12-31T23:59:59-05:00"},
            f"end: {OUT_OF_RANGE}",
        ),
        # A bare date is read on the calendar's clock, then checked the same.
        ({"start": "9000-12-31"}, f"start: {OUT_OF_RANGE}"),
    ],
)
def test_a_preview_beyond_the_ends_of_time_is_refused_naming_the_field(api, query, detail):
    answer = api.get("calendars/office/preview", **query)

    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"].startswith(detail)


def test_a_preview_near_the_latest_instant_is_answered(api):
    answer = api.get(
        "calendars/office/preview", start="8999-12-01T00:00:00Z", end="8999-12-03T00:00:00Z"
    )

    assert answer.status_code == 200, answer.content
    # 1 December 8999 is a Sunday, the 2nd a Monday.
    assert answer.json() == {
        "allowed": [{"start": "8999-12-02T00:00:00Z", "end": "8999-12-03T00:00:00Z"}]
    }


@pytest.mark.parametrize(
    ("period", "detail"),
    [
        # Its day past the end would lie past datetime.max.
        ({"start": "2027-01-01", "end": "9999-12-31"}, f"end: {OUT_OF_RANGE}"),
        (
            {"start": "2027-01-01T00:00:00Z", "end": "9999-12-31T23:59:59-05:00"},
            f"end: {OUT_OF_RANGE}",
        ),
        ({"start": "0001-01-01T00:00:00+05:00", "end": "2027-01-01T00:00:00Z"}, "start: "),
    ],
)
@pytest.mark.parametrize("kind", ["exclude", "include"])
def test_a_period_beyond_the_ends_of_time_is_refused(client, kind, period, detail):
    writer = KeyedClient(client, ["calendars:write", "jobs:write"])
    writer.put("calendars/office", {"weekdays": ["mon", "tue", "wed", "thu", "fri"]})
    before = list(Calendar.objects.values()), list(CalendarPeriod.objects.values())

    answer = writer.put("calendars/office", {kind: [period]})
    applied = writer.post("apply", {"calendars": [{"name": "office", kind: [period]}]})

    assert answer.status_code == applied.status_code == 422, answer.content
    assert answer.json()["detail"].startswith(detail)
    assert applied.json()["detail"].startswith(f"calendars[0].{detail}")
    assert (list(Calendar.objects.values()), list(CalendarPeriod.objects.values())) == before
