"""Text a database cannot store (a NUL, which PostgreSQL refuses even in a
query, or a lone surrogate, which is not UTF-8) in a job's, a calendar's or
a concurrency group's fields, nested JSON included, and in a pause reason:
a 422 naming the field, over the API and over POST /api/v1/apply, and
nothing changes. The same answer on SQLite, which would have stored a NUL."""

import datetime as dt

import pytest
import time_machine

from calendars.models import Calendar, CalendarPeriod
from scheduler.models import Job
from scheduler.runs.concurrency_models import ConcurrencyGroup
from tests.control.keyed_client import KeyedClient

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
NUL, SURROGATE = "a\x00b", "a\ud800b"
JOB = {"name": "report", "schedule": "30 2 * * *", "command": "python report.py"}
CALENDAR = {"name": "office", "weekdays": ["mon", "tue", "wed", "thu", "fri"]}

JOB_CASES = [
    ({"name": NUL}, "name: must not contain NUL"),
    ({"command": NUL}, "command: must not contain NUL"),
    ({"description": SURROGATE}, "description: must be valid Unicode text"),
    ({"schedule": NUL}, "schedule: must not contain NUL"),
    ({"timezone": NUL}, "timezone: must not contain NUL"),
    ({"owner": SURROGATE}, "owner: must be valid Unicode text"),
    ({"calendar": NUL}, "calendar: must not contain NUL"),
    ({"concurrency_group": NUL}, "concurrency_group: must not contain NUL"),
    ({"env": {"REGION": NUL}}, "env.REGION: must not contain NUL"),
    ({"env": {SURROGATE: "eu"}}, "env: the name 'a\\ud800b' must be valid Unicode text"),
    ({"labels": ["linux", NUL]}, "labels[1]: must not contain NUL"),
    ({"parameters": [SURROGATE]}, "parameters[0]: must be valid Unicode text"),
    ({"on_failure": [NUL]}, "on_failure[0]: must not contain NUL"),
]
CALENDAR_CASES = [
    ({"description": NUL}, "description: must not contain NUL"),
    ({"timezone": SURROGATE}, "timezone: must be valid Unicode text"),
    ({"base": NUL}, "base: must not contain NUL"),
    ({"weekdays": ["mon", NUL]}, "weekdays[1]: must not contain NUL"),
    ({"holidays": {"country": NUL}}, "holidays.country: must not contain NUL"),
    (
        {"exclude": [{"start": "2027-01-01", "end": "2027-01-02", "label": NUL}]},
        "exclude[0].label: must not contain NUL",
    ),
]


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def api(client):
    return KeyedClient(client, ["admin"])


def stored():
    return (
        list(Job.objects.order_by("pk").values()),
        list(Calendar.objects.order_by("pk").values()),
        list(CalendarPeriod.objects.order_by("pk").values()),
        list(ConcurrencyGroup.objects.order_by("pk").values()),
    )


def refused(answer, detail):
    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"].startswith(detail)


@pytest.mark.parametrize(("fields", "detail"), JOB_CASES)
def test_a_job_with_unstorable_text_is_refused_naming_the_field(api, fields, detail):
    api.post("jobs", JOB)
    before = stored()

    refused(api.post("jobs", {**JOB, "name": "other", **fields}), detail)
    if "name" not in fields:
        refused(api.patch("jobs/report", fields), detail)
    refused(api.post("apply", {"jobs": [{**JOB, **fields}]}), f"jobs[0].{detail}")

    assert stored() == before


@pytest.mark.parametrize(("fields", "detail"), CALENDAR_CASES)
def test_a_calendar_with_unstorable_text_is_refused_naming_the_field(api, fields, detail):
    api.put("calendars/office", CALENDAR)
    before = stored()

    refused(api.put("calendars/office", {**CALENDAR, **fields}), detail)
    refused(api.post("apply", {"calendars": [{**CALENDAR, **fields}]}), f"calendars[0].{detail}")

    assert stored() == before


def test_a_calendar_or_group_named_with_a_nul_is_refused_by_apply(api):
    before = stored()

    refused(api.post("apply", {"calendars": [{"name": NUL}]}), "calendars[0].name: must not")
    refused(
        api.post("apply", {"concurrency_groups": [{"name": NUL, "max_concurrent": 1}]}),
        "concurrency_groups[0].name: must not contain NUL",
    )
    group = {"name": "reports", "max_concurrent": 2, "description": SURROGATE}
    refused(
        api.post("apply", {"concurrency_groups": [group]}),
        "concurrency_groups[0].description: must be valid Unicode text",
    )

    assert stored() == before


@pytest.mark.parametrize("reason", [NUL, SURROGATE])
def test_a_pause_reason_with_unstorable_text_is_refused(api, reason):
    api.post("jobs", JOB)
    before = stored()

    refused(api.post("jobs/report/pause", {"reason": reason}), "reason: must")

    assert stored() == before


@pytest.mark.parametrize("query", [{"name": NUL}, {"label": NUL}, {"cursor": NUL}])
def test_a_job_list_filter_with_a_nul_is_refused_naming_it(api, query):
    answer = api.get("jobs", **query)

    (field,) = query
    refused(answer, f"query.{field}: Value error, must not contain NUL")


def test_a_calendar_name_with_a_nul_names_no_calendar(api):
    api.put("calendars/office", CALENDAR)
    before = stored()

    assert api.get("calendars/a%00b").status_code == 404
    assert api.get("calendars/a%00b/preview").status_code == 404
    refused(api.put("calendars/a%00b", {}), "name: must not contain NUL")

    assert stored() == before
