"""`schedules`, `at`, `not_before`, `not_after` and `max_runs` where jobs'
fields appear (docs/design.md §14): the apply file and its export, the
management API and the admin. Each refuses bad input naming the field
(`jobs[0].at[1]`) and changes nothing; each previews what the loop fires."""

import datetime as dt

import pytest
import time_machine
from django.urls import reverse

from audit.models import AuditEvent
from scheduler.apply.document import ApplyError, apply
from scheduler.apply.export import export, job_item
from scheduler.firing import ticks
from scheduler.models import Job
from tests.admin_forms import job_form
from tests.control.keyed_client import KeyedClient
from tests.factories import CalendarFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)  # a Tuesday
ITEM = {
    "name": "close",
    "command": "close-books",
    "timezone": "Europe/Berlin",
    "schedules": ["0 9 * * 1", {"cron": "0 9 * * 1", "timezone": "America/New_York"}],
    "at": ["2026-12-24T12:00:00+01:00", "2026-12-02T08:00:00Z"],
    "not_before": "2026-12-01T10:00:00+00:00",
    "not_after": "2027-06-30T00:00:00+02:00",
    "max_runs": 4,
}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def applied(*items, now=NOW, dry_run=False):
    changes = apply({"jobs": list(items)}, now=now, dry_run=dry_run)
    return [(c.action, c.name, sorted(c.diff)) for c in changes]


def refusal(item, now=NOW):
    before = list(Job.objects.values())
    with pytest.raises(ApplyError) as refused:
        applied(item, now=now)
    assert list(Job.objects.values()) == before  # nothing changed
    return refused.value.errors


# -- apply ------------------------------------------------------------------------------


def test_apply_stores_the_timing_and_a_second_apply_changes_nothing():
    assert applied(ITEM)[0][:2] == ("create", "close")
    job = Job.objects.get()
    assert job.schedule == ""
    assert job.schedules == ITEM["schedules"]
    # Sorted, distinct, in UTC: the same instant written otherwise compares equal.
    assert job.at == ["2026-12-02T08:00:00+00:00", "2026-12-24T11:00:00+00:00"]
    assert (job.not_before, job.not_after) == (
        dt.datetime(2026, 12, 1, 10, tzinfo=dt.UTC),
        dt.datetime(2026, 6, 29, 22, tzinfo=dt.UTC).replace(year=2027),
    )
    assert job.max_runs == 4
    assert [t.isoformat() for t in job.upcoming(NOW, 10)] == [
        "2026-12-02T08:00:00+00:00",
        "2026-12-07T08:00:00+00:00",  # Monday 09:00 in Berlin
        "2026-12-07T14:00:00+00:00",  # Monday 09:00 in New York
        "2026-12-14T08:00:00+00:00",  # the fourth: max_runs
    ]
    assert job.next_run_at == dt.datetime(2026, 12, 2, 8, tzinfo=dt.UTC)
    rewritten = {**ITEM, "at": ["2026-12-24T11:00:00Z", "2026-12-02T09:00:00+01:00"]}
    assert applied(rewritten) == [("unchanged", "close", [])]


def test_the_export_round_trips_the_timing():
    applied(ITEM)
    item = job_item(Job.objects.get(), NOW)
    assert {key: item[key] for key in ("schedules", "at", "not_before", "not_after")} == {
        "schedules": ITEM["schedules"],
        "at": ["2026-12-02T08:00:00+00:00", "2026-12-24T11:00:00+00:00"],
        "not_before": "2026-12-01T10:00:00+00:00",
        "not_after": "2027-06-29T22:00:00+00:00",
    }
    assert item["max_runs"] == 4
    document = export(now=NOW).document
    assert applied(*document["jobs"], dry_run=True) == [("unchanged", "close", [])]
    Job.objects.all().delete()
    applied(*document["jobs"])
    assert job_item(Job.objects.get(), NOW) == item


def test_an_export_leaves_out_the_instants_gone_by_and_restores_into_an_empty_database():
    applied(ITEM)
    later = dt.datetime(2026, 12, 10, tzinfo=dt.UTC)  # 2026-12-02 08:00 has gone by
    document = export(now=later).document
    assert document["jobs"][0]["at"] == ["2026-12-24T11:00:00+00:00"]
    Job.objects.all().delete()
    [(action, name, _)] = applied(*document["jobs"], now=later)
    assert (action, name) == ("create", "close")
    assert Job.objects.get().at == ["2026-12-24T11:00:00+00:00"]


def test_an_export_made_after_an_instant_passed_plans_no_change_against_its_database():
    applied(ITEM)
    later = dt.datetime(2026, 12, 10, tzinfo=dt.UTC)
    document = export(now=later).document
    assert applied(*document["jobs"], now=later, dry_run=True) == [("unchanged", "close", [])]
    # A file that leaves out an instant gone by leaves it with the job.
    applied({**ITEM, "at": ["2026-12-24T11:00:00Z"]}, now=later)
    assert Job.objects.get().at == ["2026-12-02T08:00:00+00:00", "2026-12-24T11:00:00+00:00"]


def test_a_job_whose_one_shot_instants_have_all_passed_is_left_out_of_an_export():
    applied({"name": "once", "command": "true", "at": ["2026-12-02T08:00:00Z"]}, ITEM)
    later = dt.datetime(2026, 12, 10, tzinfo=dt.UTC)
    exported = export(now=later)
    assert [item["name"] for item in exported.document["jobs"]] == ["close"]
    assert any("once" in warning and "never fire again" in warning for warning in exported.warnings)
    Job.objects.all().delete()
    applied(*exported.document["jobs"], now=later)  # a restore: nothing refused
    assert list(Job.objects.values_list("name", flat=True)) == ["close"]


def test_a_one_shot_instant_already_past_is_refused_naming_it():
    errors = refusal({**ITEM, "at": ["2026-12-24T12:00:00+01:00", "2026-12-01T09:00:00Z"]})
    assert errors == [
        "jobs[0].at[1]: 2026-12-01T09:00:00+00:00 is past (now is 2026-12-01T09:30:00+00:00): "
        "a new one-shot instant must be in the future"
    ]


def test_instants_the_job_has_stay_valid_once_past_so_the_file_applies_again():
    applied(ITEM)
    later = dt.datetime(2026, 12, 10, tzinfo=dt.UTC)
    assert applied(ITEM, now=later) == [("unchanged", "close", [])]
    # A new instant in the past is still refused, beside them.
    errors = refusal({**ITEM, "at": [*ITEM["at"], "2026-12-09T00:00:00Z"]}, now=later)
    assert errors[0].startswith("jobs[0].at[2]: 2026-12-09T00:00:00+00:00 is past")


@pytest.mark.parametrize(
    "change, error",
    [
        ({"at": ["2026-12-24 12:00"]}, "jobs[0].at[0]: '2026-12-24 12:00' needs an offset"),
        ({"at": ["christmas"]}, "jobs[0].at[0]: 'christmas' is not an ISO 8601 instant"),
        ({"at": "2026-12-24T12:00:00Z"}, "jobs[0].at: expected a list of ISO 8601 instants"),
        ({"schedules": ["0 9 * *"]}, "jobs[0].schedules[0]: schedule '0 9 * *' has 4 fields"),
        (
            {"schedules": ["@daily", {"cron": "@daily", "timezone": "Mars/Olympus"}]},
            "jobs[0].schedules[1].timezone: 'Mars/Olympus' is not a known IANA timezone",
        ),
        ({"schedules": [{"cron": "@daily", "tz": "UTC"}]}, "jobs[0].schedules[0]: unknown field"),
        ({"schedules": [{"timezone": "UTC"}]}, "jobs[0].schedules[0].cron: expected a schedule"),
        ({"schedules": "@daily"}, "jobs[0].schedules: expected a list"),
        ({"schedules": ["@daily"] * 21}, "jobs[0].schedules: at most 20 schedules, got 21"),
        ({"not_before": "soon"}, "jobs[0].not_before: 'soon' is not an ISO 8601 instant"),
        ({"not_after": "2027-01-01T00:00:00"}, "jobs[0].not_after: '2027-01-01T00:00:00' needs"),
        (
            {"not_after": "2026-12-01T10:00:00Z"},
            "jobs[0].not_after: must be after not_before",
        ),
        (
            {"at": [], "not_after": "2026-12-06T00:00:00Z"},
            "jobs[0].not_after: no occurrence of the job's schedules and instants falls",
        ),
        ({"max_runs": 0}, "jobs[0].max_runs: must be at least 1, got 0"),
        ({"max_runs": "3"}, "jobs[0].max_runs: expected a whole number"),
        ({"max_runs": 100_001}, "jobs[0].max_runs: Ensure this value is less than or equal"),
    ],
)
def test_bad_timing_is_refused_naming_the_field(change, error):
    errors = refusal({**ITEM, **change})
    assert len(errors) == 1 and errors[0].startswith(error), errors


def test_a_schedule_that_never_meets_the_calendar_is_named_by_its_index():
    CalendarFactory(name="weekdays", weekdays=["mon", "tue", "wed", "thu", "fri"])
    errors = refusal({**ITEM, "calendar": "weekdays", "schedules": ["0 9 * * 1", "0 9 * * 6"]})
    assert errors == [
        "jobs[0].schedules[1]: never fires: schedule '0 9 * * 6' never meets calendar "
        "'weekdays' within 5 years"
    ]


def test_schedules_given_without_schedule_replace_the_stored_schedule():
    applied({"name": "close", "command": "x", "schedule": "0 3 * * *"})
    applied({"name": "close", "command": "x", "schedules": ["0 4 * * *"]})
    job = Job.objects.get()
    assert (job.schedule, job.schedules) == ("", ["0 4 * * *"])


def test_a_completed_job_stays_completed_when_its_file_is_applied_again():
    applied({**ITEM, "max_runs": 1})
    ticks.trigger_due(dt.datetime(2026, 12, 2, 8, tzinfo=dt.UTC))
    job = Job.objects.get()
    assert job.completed and not job.enabled
    assert AuditEvent.objects.filter(action="job.completed").count() == 1
    later = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)
    assert applied({**ITEM, "max_runs": 1}, now=later) == [("unchanged", "close", [])]

    # Raised, it runs again, from its next instant.
    assert applied({**ITEM, "max_runs": 2}, now=later) == [
        ("update", "close", ["enabled", "max_runs"])
    ]
    job.refresh_from_db()
    assert (job.enabled, job.completed, job.scheduled_runs) == (True, False, 1)
    assert job.next_run_at == dt.datetime(2026, 12, 7, 8, tzinfo=dt.UTC)
    assert job.upcoming(later, 5) == [job.next_run_at]


# -- the management API -------------------------------------------------------------------


@pytest.fixture
def api(client):
    return KeyedClient(client, ["jobs:read", "jobs:write"])


def test_the_api_takes_and_shows_the_timing_and_its_next_agrees(api):
    created = api.post("jobs", ITEM)
    assert created.status_code == 201, created.content
    shown = created.json()
    assert shown["schedules"] == ITEM["schedules"]
    assert shown["at"] == ["2026-12-02T08:00:00+00:00", "2026-12-24T11:00:00+00:00"]
    assert shown["not_before"] == "2026-12-01T10:00:00Z"
    assert (shown["max_runs"], shown["scheduled_runs"], shown["completed"]) == (4, 0, False)
    instants = api.get("jobs/close/next", count=10).json()["instants"]
    assert instants == [t.isoformat() for t in Job.objects.get().upcoming(NOW, 10)]
    assert len(instants) == 4


def test_a_completed_job_reads_disabled_and_completed(api):
    api.post("jobs", {**ITEM, "max_runs": 1})
    ticks.trigger_due(dt.datetime(2026, 12, 2, 8, tzinfo=dt.UTC))
    shown = api.get("jobs/close").json()
    assert (shown["enabled"], shown["completed"], shown["scheduled_runs"]) == (False, True, 1)
    assert api.get("jobs/close/next").json() == {"instants": []}
    # Enabling it alone leaves it completed; raising max_runs and enabling runs it again.
    assert api.patch("jobs/close", {"enabled": True}).json()["enabled"] is False
    revived = api.patch("jobs/close", {"max_runs": 2, "enabled": True}).json()
    assert (revived["enabled"], revived["completed"]) == (True, False)


@pytest.mark.parametrize(
    "change, detail",
    [
        ({"at": ["2027-01-01T00:00:00Z", "2026-11-30T00:00:00Z"]}, "at[1]: 2026-11-30T00:00"),
        ({"schedules": ["@daily", "@nope"]}, "schedules[1]: unknown macro"),
        ({"max_runs": -1}, "max_runs: must be at least 1"),
    ],
)
def test_the_api_refuses_bad_timing_naming_the_field(api, change, detail):
    assert api.post("jobs", ITEM).status_code == 201
    before = list(Job.objects.values())
    answer = api.patch("jobs/close", change)
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith(detail), answer.json()
    assert list(Job.objects.values()) == before


# -- the admin ----------------------------------------------------------------------------


def test_the_admin_takes_schedules_one_a_line_or_as_json_and_one_shot_instants(admin_client):
    url = reverse("admin:scheduler_job_add")
    posted = admin_client.post(
        url,
        job_form(
            schedules="0 9 * * 1\n0 18 * * 5",
            at="2026-12-24T12:00:00+01:00, 2026-12-02T08:00:00Z",
            max_runs="3",
        ),
    )
    assert posted.status_code == 302, posted.content.decode()[:3000]
    job = Job.objects.get()
    assert job.schedules == ["0 9 * * 1", "0 18 * * 5"]
    assert job.at == ["2026-12-02T08:00:00+00:00", "2026-12-24T11:00:00+00:00"]
    assert job.max_runs == 3 and job.next_run_at is not None

    change = reverse("admin:scheduler_job_change", args=[job.pk])
    page = admin_client.get(change).content.decode()
    assert "0 of 3" in page  # scheduled runs of max_runs
    json_form = job_form(
        schedules='[{"cron": "0 9 * * 1", "timezone": "America/New_York"}]',
        at=", ".join(job.at),
        max_runs="3",
    )
    assert admin_client.post(change, json_form).status_code == 302
    job.refresh_from_db()
    assert job.schedules == [{"cron": "0 9 * * 1", "timezone": "America/New_York"}]


def test_the_admin_refuses_a_past_instant_and_a_bad_schedule_on_their_fields(admin_client):
    url = reverse("admin:scheduler_job_add")
    refused = admin_client.post(
        url, job_form(schedules="0 9 * * 1\nbad", at="2026-11-30T00:00:00Z")
    )
    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors
    assert errors["at"] == [
        "at[0]: 2026-11-30T00:00:00+00:00 is past (now is 2026-12-01T09:30:00+00:00): "
        "a new one-shot instant must be in the future"
    ]
    assert errors["schedules"][0].startswith("schedules[1]: schedule 'bad' has 1 fields")
    assert not Job.objects.exists()


def test_the_admin_preview_counts_the_typed_timing(admin_client):
    url = reverse("admin:scheduler_job_preview")
    answer = admin_client.get(
        url,
        {
            "schedule": "",
            "timezone": "UTC",
            "schedules": "0 9 * * *\n0 21 * * *",
            "at": "2026-12-01T12:00:00Z",
            "not_after_0": "2026-12-02",
            "not_after_1": "09:00:00",
            "max_runs": "",
        },
    ).json()
    assert [entry["at"] for entry in answer["entries"]] == [
        "2026-12-01T12:00:00Z",
        "2026-12-01T21:00:00Z",
        "2026-12-02T09:00:00Z",
    ]


@pytest.mark.parametrize(
    "change, error",
    [
        ({"at": ["9999-12-31T23:59:59-14:00"]}, "jobs[0].at[0]: '9999-12-31T23:59:59-14:00' must"),
        ({"not_before": "0001-01-01T00:00:00+00:00"}, "jobs[0].not_before: '0001-01-01T00:00"),
        ({"not_after": "9500-01-01T00:00:00Z"}, "jobs[0].not_after: '9500-01-01T00:00:00Z' must"),
    ],
)
def test_instants_past_the_years_croniq_stores_are_refused(change, error):
    errors = refusal({**ITEM, **change})
    assert errors[0].startswith(error) and "between the years 1970 and 9000" in errors[0]


def test_the_admin_refuses_a_bound_past_the_years_croniq_stores(admin_client):
    refused = admin_client.post(
        reverse("admin:scheduler_job_add"),
        job_form(not_before_0="0001-01-01", not_before_1="00:00:00"),
    )
    assert refused.context["adminform"].form.errors["not_before"] == [
        "must lie between the years 1970 and 9000"
    ]
