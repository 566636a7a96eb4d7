"""The job fields `stdin`, `run_as` and `run_on_register` (docs/design.md
§13) as the model, apply, the admin form, the API and the loop take them;
and a job without a schedule, which only `run_on_register` allows."""

import datetime as dt

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from dispatch.capacity import forecast
from scheduler.admin.forms import JobAdminForm
from scheduler.apply.document import ApplyError, apply
from scheduler.firing import ticks
from scheduler.jobs.fire_times import NO_SCHEDULE
from scheduler.models import Execution, Job
from tests.admin_forms import job_form
from tests.control.keyed_client import KeyedClient
from tests.factories import JobFactory
from tests.scheduler.test_admin_forms import posted

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
MAX_STDIN = 64 * 1024


def refusal(**fields):
    """{field: messages} of `full_clean` for a job with `fields`."""
    job = Job(**{"name": "report", "schedule": "@daily", "command": "true", **fields})
    with pytest.raises(ValidationError) as refused:
        job.full_clean()
    return refused.value.message_dict


def applied(**fields):
    item = {"name": "report", "command": "true", **fields}
    apply({"jobs": [item]}, now=NOW)
    return Job.objects.get(name="report")


def apply_errors(**fields):
    item = {"name": "report", "command": "true", **fields}
    with pytest.raises(ApplyError) as refused:
        apply({"jobs": [item]}, now=NOW, dry_run=True)
    return refused.value.errors


# -- the model's checks ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["nobody", "www-data", "svc.backup", "_apt", "a" * 32, "u1"])
def test_run_as_takes_posix_user_names(name):
    Job(name="report", schedule="@daily", command="true", run_as=name).full_clean()


@pytest.mark.parametrize("name", ["-rf", "a b", "root;id", "ü", "a" * 33, "1000", "x/y"])
def test_run_as_refuses_what_is_not_a_user_name(name):
    messages = refusal(run_as=name)["run_as"]
    assert any("is not a user name" in message for message in messages)


def test_stdin_is_bounded_in_bytes():
    Job(name="report", schedule="@daily", command="true", stdin="x" * MAX_STDIN).full_clean()
    assert refusal(stdin="é" * (MAX_STDIN // 2 + 1))["stdin"] == [
        f"at most {MAX_STDIN} bytes (got {MAX_STDIN + 2})"
    ]


def test_a_job_without_a_schedule_must_run_on_register():
    [refused] = refusal(schedule="")["schedule"]
    assert refused.startswith("required, unless the job has schedules or one-shot instants")
    assert "runs on register (run_on_register: true)" in refused
    Job(name="boot", schedule="", command="true", run_on_register=True).full_clean()


# -- a job without a schedule ---------------------------------------------------------


def test_a_job_without_a_schedule_never_fires_and_says_why():
    job = JobFactory(schedule="", run_on_register=True, next_run_at=None)
    job.reschedule(NOW)
    assert job.next_run_at is None
    assert job.upcoming(NOW, 5) == []
    assert job.no_fires_reason(NOW) == NO_SCHEDULE


def test_the_loop_leaves_a_job_without_a_schedule_alone():
    job = JobFactory(schedule="", run_on_register=True, next_run_at=None)
    assert ticks.trigger_due(NOW) == 0
    job.refresh_from_db()
    assert (job.error, job.next_run_at) == ("", None)
    assert not Execution.objects.exists()


# -- apply ----------------------------------------------------------------------------


def test_apply_writes_the_three_fields_and_a_second_apply_changes_nothing():
    fields = {"stdin": "line 1\nline 2\n", "run_as": "backup", "run_on_register": True}
    job = applied(**fields)
    assert (job.stdin, job.run_as, job.run_on_register, job.schedule) == (
        "line 1\nline 2\n",
        "backup",
        True,
        "",
    )
    assert job.next_run_at is None
    changes = apply({"jobs": [{"name": "report", "command": "true", **fields}]}, now=NOW)
    assert [c.action for c in changes] == ["unchanged"]


def test_apply_names_the_field_it_refuses():
    assert apply_errors(schedule="@daily", run_as="not a user")[0].startswith("jobs[0].run_as: ")
    [refused] = apply_errors()
    assert refused.startswith("jobs[0].schedule: required, unless the job has schedules")
    big = apply_errors(schedule="@daily", stdin="x" * (MAX_STDIN + 1))
    assert big == [f"jobs[0].stdin: at most {MAX_STDIN} bytes (got {MAX_STDIN + 1})"]


def test_leaving_the_fields_out_of_a_later_apply_resets_them():
    applied(schedule="@daily", stdin="x", run_as="backup", run_on_register=True)
    job = applied(schedule="@daily")
    assert (job.stdin, job.run_as, job.run_on_register) == ("", "", False)


# -- the admin form and the API ---------------------------------------------------------


def test_the_admin_form_edits_the_three_fields():
    data = job_form(schedule="", stdin="hello\n", run_as="backup", run_on_register="on")
    form = JobAdminForm(data=posted(data))
    assert form.is_valid(), form.errors
    job = form.save()
    assert (job.stdin, job.run_as, job.run_on_register, job.schedule) == (
        "hello\n",
        "backup",
        True,
        "",
    )


def test_the_admin_form_refuses_a_bad_user_name_on_its_field():
    form = JobAdminForm(data=posted(job_form(run_as="-x")))
    assert not form.is_valid()
    assert list(form.errors) == ["run_as"]


def test_the_api_takes_and_shows_the_three_fields(client):
    api = KeyedClient(client, ["jobs:read", "jobs:write"])
    item = {"name": "boot", "command": "cat", "stdin": "hi\n", "run_as": "backup"}
    refused = api.post("jobs", item)
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("schedule: required, unless")

    answer = api.post("jobs", {**item, "run_on_register": True})
    assert answer.status_code == 201, answer.content
    shown = answer.json()
    assert (shown["stdin"], shown["run_as"], shown["run_on_register"]) == ("hi\n", "backup", True)
    assert (shown["schedule"], shown["next_run_at"]) == ("", None)
    assert api.get("jobs/boot/next").json() == {"instants": []}

    changed = api.patch("jobs/boot", {"run_as": "", "schedule": "@daily"})
    assert changed.status_code == 200, changed.content
    assert changed.json()["run_as"] == ""


def test_the_job_admin_saves_and_shows_a_job_that_only_runs_on_register(admin_client):
    form = job_form(schedule="", run_on_register="on", stdin="a\nb\n", run_as="backup")
    answer = admin_client.post(reverse("admin:scheduler_job_add"), form, follow=True)
    assert answer.status_code == 200
    job = Job.objects.get(name="report")
    assert (job.schedule, job.run_on_register, job.stdin, job.next_run_at) == (
        "",
        True,
        "a\nb\n",
        None,
    )
    page = admin_client.get(reverse("admin:scheduler_job_change", args=[job.pk]))
    assert page.status_code == 200
    assert NO_SCHEDULE in page.content.decode()
    listed = admin_client.get(reverse("admin:scheduler_job_changelist")).content.decode()
    assert "no schedule: runs when a runner starts (run on register)" in listed
    refused = admin_client.post(reverse("admin:scheduler_job_add"), job_form(name="x", schedule=""))
    assert "required, unless the job has schedules" in refused.content.decode()


def test_the_dashboard_shows_a_job_without_a_schedule(admin_client):
    JobFactory(name="boot", schedule="", run_on_register=True, next_run_at=None)
    overview = admin_client.get(reverse("dashboard:overview"))
    assert overview.status_code == 200
    assert "when a runner starts" in overview.content.decode()
    page = admin_client.get(reverse("dashboard:job", args=["boot"]))
    assert page.status_code == 200
    assert NO_SCHEDULE in page.content.decode()
    assert "once on each matching runner when it starts" in page.content.decode()


def test_the_dashboards_job_page_shows_the_user_and_the_size_of_the_input(admin_client):
    JobFactory(name="fed", stdin="secret-ish\n", run_as="backup")
    html = admin_client.get(reverse("dashboard:job", args=["fed"])).content.decode()
    assert "11 characters on standard input" in html
    assert "secret-ish" not in html  # the input itself is not shown
    assert "<code>backup</code>" in html


def test_the_capacity_forecast_leaves_a_job_without_a_schedule_out_unblamed():
    JobFactory(name="hourly", schedule="@hourly", labels=["linux"])
    JobFactory(name="boot", schedule="", run_on_register=True, labels=["linux"])
    result = forecast(NOW)
    assert result.skipped == {}
    [linux] = [found for found in result.label_sets if found.labels == ("linux",)]
    assert linux.jobs == 1
