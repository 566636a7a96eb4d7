"""`/api/v1/jobs` (docs/design.md §8): jobs addressed by name, with the apply
file's fields and checks, paused with a reason and an end, audited."""

import datetime as dt

import pytest
import time_machine

from audit.models import AuditEvent
from scheduler.apply.document import ApplyError, apply
from scheduler.models import Job
from tests.control.keyed_client import KeyedClient
from tests.factories import CalendarFactory, JobFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
REPORT = {
    "name": "nightly-report",
    "schedule": "30 2 * * *",
    "timezone": "Europe/Berlin",
    "command": "python report.py",
    "env": {"REPORT_DIR": "/srv/reports"},
    "labels": ["linux"],
    "singleton": True,
    "timeout": 3600,
}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def api(client):
    return KeyedClient(client, ["jobs:read", "jobs:write"])


def stored():
    return list(Job.objects.order_by("name").values())


def test_a_job_is_created_with_the_apply_files_fields_and_audited(api):
    answer = api.post("jobs", REPORT)

    assert answer.status_code == 201, answer.content
    job = answer.json()
    assert job["name"] == "nightly-report"
    assert job["env"] == {"REPORT_DIR": "/srv/reports"}
    assert (job["singleton"], job["timeout"], job["retries"]) == (True, 3600, 0)
    assert (job["calendar"], job["calendar_policy"]) == (None, "skip")
    assert job["misfire_policy"] == "run_once"
    assert (job["paused"], job["paused_until"], job["pause_reason"]) == (False, None, "")
    assert job["managed_by"] == "api"
    # 02:30 in Berlin is 01:30 UTC: the next one is tomorrow's.
    assert job["next_run_at"] == "2026-12-02T01:30:00Z"
    event = AuditEvent.objects.get(action="job.created")
    assert (event.actor_kind, event.actor_name) == (AuditEvent.API_KEY, "deploy")
    assert event.target_repr == "nightly-report"
    assert event.data["via"] == "api"
    assert api.get("jobs/nightly-report").json() == job


def test_a_taken_name_is_409_and_changes_nothing(api):
    api.post("jobs", REPORT)
    before = stored()

    answer = api.post("jobs", {**REPORT, "command": "rm -rf /"})

    assert answer.status_code == 409
    assert answer.json() == {"detail": "a job named 'nightly-report' already exists"}
    assert stored() == before


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"colour": "red"}, "unknown field(s): colour"),
        ({"schedule": "61 * * * *"}, "schedule: "),
        ({"timezone": "Mars/Olympus"}, "timezone: "),
        ({"schedule": "0 0 30 2 *"}, "schedule: "),
        ({"env": ["A=1"]}, "env: expected a mapping"),
        ({"timeout": "soon"}, "timeout: "),
        ({"calendar": "nowhere"}, "calendar: no calendar named 'nowhere'"),
        ({"name": ""}, "name: required"),
    ],
)
def test_what_apply_refuses_the_api_refuses_naming_the_field(api, change, detail):
    item = {**REPORT, **change}

    answer = api.post("jobs", item)

    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"].startswith(detail)
    assert not Job.objects.exists()
    with pytest.raises(ApplyError) as refused:
        apply({"jobs": [item]}, now=NOW)
    # The same sentence, only placed in the file.
    assert refused.value.errors[0].removeprefix("jobs[0]").lstrip(".: ").startswith(detail)


def test_a_body_that_is_not_a_mapping_is_422(api):
    assert api.post("jobs", ["nightly-report"]).status_code == 422
    assert not Job.objects.exists()


def test_an_unknown_job_is_404(api):
    answer = api.get("jobs/nope")
    assert answer.status_code == 404
    assert answer.json() == {"detail": "no job named 'nope'"}


def test_jobs_are_listed_by_name_filtered_and_paged(api):
    JobFactory(name="billing-sync", labels=["linux", "gpu"])
    JobFactory(name="billing-export", labels=["linux"], enabled=False)
    JobFactory(name="cleanup", labels=["windows"])
    JobFactory(name="billing-archive", labels=["gpus"])

    def names(**query):
        answer = api.get("jobs", **query)
        assert answer.status_code == 200, answer.content
        return [job["name"] for job in answer.json()["items"]]

    assert names() == ["billing-archive", "billing-export", "billing-sync", "cleanup"]
    assert names(label="gpu") == ["billing-sync"]
    assert names(label="linux", enabled="true") == ["billing-sync"]
    assert names(enabled="false") == ["billing-export"]
    assert names(name="billing-") == ["billing-archive", "billing-export", "billing-sync"]
    first = api.get("jobs", limit=3).json()
    rest = api.get("jobs", limit=3, cursor=first["next_cursor"]).json()
    assert [j["name"] for j in rest["items"]] == ["cleanup"] and rest["next_cursor"] is None


def test_a_patch_changes_the_fields_it_names_and_reschedules(api):
    api.post("jobs", REPORT)

    answer = api.patch("jobs/nightly-report", {"schedule": "0 6 * * *", "retries": 2})

    assert answer.status_code == 200, answer.content
    job = answer.json()
    assert (job["schedule"], job["retries"], job["timeout"]) == ("0 6 * * *", 2, 3600)
    assert job["next_run_at"] == "2026-12-02T05:00:00Z"
    event = AuditEvent.objects.get(action="job.changed")
    assert set(event.data["diff"]) == {"schedule", "retries"}


@pytest.mark.parametrize(
    ("patch", "detail"),
    [
        ({"schedule": "every day"}, "schedule: "),
        ({"name": "renamed"}, "name: a job is addressed by its name"),
        ({"adopt": "yes"}, "adopt: expected true or false"),
        ({"paused": True}, "unknown field(s): paused"),
    ],
)
def test_a_refused_patch_is_422_and_changes_nothing(api, patch, detail):
    api.post("jobs", REPORT)
    before = stored()

    answer = api.patch("jobs/nightly-report", patch)

    assert answer.status_code == 422
    assert answer.json()["detail"].startswith(detail)
    assert stored() == before


def test_a_deleted_job_is_gone_and_audited(api):
    api.post("jobs", REPORT)

    answer = api.delete("jobs/nightly-report")

    assert answer.status_code == 204
    assert not Job.objects.exists()
    event = AuditEvent.objects.get(action="job.deleted")
    assert event.actor_name == "deploy" and event.data["name"] == "nightly-report"
    assert api.delete("jobs/nightly-report").status_code == 404


def test_pause_with_a_reason_and_an_end_then_resume(api):
    api.post("jobs", REPORT)

    answer = api.post(
        "jobs/nightly-report/pause", {"reason": "db migration", "until": "2026-12-03T00:00:00Z"}
    )

    assert answer.status_code == 200, answer.content
    job = answer.json()
    assert (job["paused"], job["pause_reason"]) == (True, "db migration")
    assert (job["paused_until"], job["next_run_at"]) == ("2026-12-03T00:00:00Z", None)
    event = AuditEvent.objects.get(action="job.paused")
    assert event.data == {"reason": "db migration", "until": "2026-12-03T00:00:00+00:00"}
    assert event.actor_name == "deploy"

    job = api.post("jobs/nightly-report/resume").json()
    assert (job["paused"], job["paused_until"], job["pause_reason"]) == (False, None, "")
    assert job["next_run_at"] == "2026-12-02T01:30:00Z"
    assert AuditEvent.objects.filter(action="job.resumed").count() == 1


def test_a_pause_end_with_an_offset_postgresql_cannot_store_is_kept_in_utc(api):
    api.post("jobs", REPORT)
    answer = api.post("jobs/nightly-report/pause", {"until": "2026-12-03T16:00:00+16:00"})
    assert answer.status_code == 200, answer.content
    assert answer.json()["paused_until"] == "2026-12-03T00:00:00Z"


def test_pause_without_a_body_pauses_until_resumed(api):
    api.post("jobs", REPORT)
    job = api.post("jobs/nightly-report/pause").json()
    assert (job["paused"], job["paused_until"]) == (True, None)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"until": "2026-12-01T09:00:00Z"}, "until: must be in the future"),
        ({"until": "tomorrow"}, "until: "),
        ({"reason": "x" * 201}, "reason: at most 200 characters"),
    ],
)
def test_a_refused_pause_is_422_and_changes_nothing(api, body, detail):
    api.post("jobs", REPORT)
    before = stored()

    answer = api.post("jobs/nightly-report/pause", body)

    assert answer.status_code == 422
    assert detail in answer.json()["detail"]
    assert stored() == before


def test_next_lists_the_fire_times_after_an_instant(api):
    CalendarFactory(name="weekdays", weekdays=["mon", "tue", "wed", "thu", "fri"])
    api.post("jobs", {"name": "hourly", "schedule": "0 9 * * *", "command": "true",
                      "calendar": "weekdays"})  # fmt: skip

    answer = api.get("jobs/hourly/next", count=3, after="2026-12-04T10:00:00+00:00")

    assert answer.status_code == 200, answer.content
    # Friday 4th is past 09:00; the weekend is skipped.
    assert answer.json() == {
        "instants": [
            "2026-12-07T09:00:00+00:00",
            "2026-12-08T09:00:00+00:00",
            "2026-12-09T09:00:00+00:00",
        ]
    }
    assert len(api.get("jobs/hourly/next").json()["instants"]) == 10
    assert len(api.get("jobs/hourly/next", count=100).json()["instants"]) == 100


@pytest.mark.parametrize(
    "query", [{"count": 101}, {"count": 0}, {"after": "2026-12-04T10:61"}, {"after": "x"}]
)
def test_next_refuses_a_bad_count_or_after(api, query):
    api.post("jobs", REPORT)
    assert api.get("jobs/nightly-report/next", **query).status_code == 422


def test_a_key_without_the_scope_is_refused_and_changes_nothing(client):
    reader = KeyedClient(client, ["jobs:read"], name="reader")
    JobFactory(name="kept")

    for answer in (
        reader.post("jobs", REPORT),
        reader.patch("jobs/kept", {"retries": 3}),
        reader.delete("jobs/kept"),
        reader.post("jobs/kept/pause"),
    ):
        assert answer.status_code == 403
        assert answer.json() == {"detail": "needs scope jobs:write"}
    assert list(Job.objects.values_list("name", "retries", "paused_at")) == [("kept", 0, None)]
    assert KeyedClient(client, ["runners:read"], name="other").get("jobs").status_code == 403
    assert client.get("/api/v1/jobs").status_code == 401


def test_pausing_a_paused_job_changes_nothing(api):
    api.post("jobs", REPORT)
    api.post("jobs/nightly-report/pause", {"reason": "first"})

    job = api.post("jobs/nightly-report/pause", {"reason": "second"}).json()

    assert (job["paused"], job["pause_reason"]) == (True, "first")
    assert AuditEvent.objects.filter(action="job.paused").count() == 1


def test_a_job_written_in_the_admin_reads_back_whatever_its_env_holds(api):
    JobFactory(name="legacy", env={"RETRIES": 3, "DEBUG": None})
    answer = api.get("jobs/legacy")
    assert answer.status_code == 200
    assert answer.json()["env"] == {"RETRIES": 3, "DEBUG": None}


@pytest.mark.parametrize(
    ("patch", "overlap", "singleton"),
    [
        ({"overlap": "replace"}, "replace", False),
        ({"singleton": False}, "allow", False),
        ({"overlap": "queue", "max_concurrent": 3}, "queue", False),
    ],
)
def test_a_patch_of_the_overlap_policy_or_its_singleton_alias_moves_the_other(
    api, patch, overlap, singleton
):
    api.post("jobs", REPORT)  # singleton: overlap skip

    answer = api.patch("jobs/nightly-report", patch)

    assert answer.status_code == 200, answer.content
    assert (answer.json()["overlap"], answer.json()["singleton"]) == (overlap, singleton)


def test_a_chain_to_an_unknown_job_is_422_naming_the_field(api):
    answer = api.post("jobs", {**REPORT, "on_success": ["publish"]})
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith("on_success: no job named 'publish'")
    assert not Job.objects.exists()
