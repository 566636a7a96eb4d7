"""Instants the jobs calls read (a pause's `until`, next's `after`) near
the ends of time: a 422 naming the field, never an overflow's 500, and
nothing changes."""

import datetime as dt

import pytest
import time_machine

from scheduler.models import Job
from tests.control.keyed_client import KeyedClient

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
FAR = [
    "9999-12-31T23:59:59-05:00",  # past datetime.max once in UTC
    "9999-12-31T23:59:59+00:00",  # the loop's arithmetic past it overflows
    "0001-01-01T00:00:00+05:00",  # before datetime.min once in UTC
]


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def api(client):
    api = KeyedClient(client, ["jobs:read", "jobs:write"])
    api.post("jobs", {"name": "report", "schedule": "30 2 * * *", "command": "true"})
    return api


@pytest.mark.parametrize("until", FAR)
def test_a_pause_until_the_end_of_time_is_refused(api, until):
    before = list(Job.objects.values())

    answer = api.post("jobs/report/pause", {"until": until})

    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"] == "until: must lie between the years 1970 and 9000"
    assert list(Job.objects.values()) == before


def test_a_pause_until_a_far_but_representable_instant_is_kept_in_utc(api):
    answer = api.post("jobs/report/pause", {"until": "8999-12-31T18:00:00-05:00"})

    assert answer.status_code == 200, answer.content
    assert answer.json()["paused_until"] == "8999-12-31T23:00:00Z"


@pytest.mark.parametrize("after", FAR)
def test_next_after_the_end_of_time_is_refused_naming_after(api, after):
    answer = api.get("jobs/report/next", after=after)

    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"] == "after: must lie between the years 1970 and 9000"
