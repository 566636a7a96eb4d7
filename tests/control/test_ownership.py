"""Who manages a job or a calendar: apply marks what it writes and prunes
only that; the API and the admin adopt an apply-managed row before they
change it (docs/design.md §8, `managed_by`)."""

import datetime as dt
from io import StringIO

import pytest
import time_machine
import yaml
from django.core.management import call_command
from django.urls import reverse

from audit.models import AuditEvent
from calendars.models import Calendar
from scheduler.models import Job
from tests.admin_forms import calendar_form, job_form
from tests.control.keyed_client import KeyedClient
from tests.factories import CalendarFactory, JobFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
FILE = {
    "calendars": [{"name": "ops", "weekdays": ["mon", "tue"]}],
    "jobs": [
        {"name": "report", "schedule": "30 2 * * *", "timezone": "Europe/Berlin",
         "command": "python report.py", "calendar": "ops"},
        {"name": "heartbeat", "schedule": "@every 5m", "command": "true"},
    ],
}  # fmt: skip


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def api(client):
    return KeyedClient(client, ["jobs:read", "jobs:write", "calendars:write"])


@pytest.fixture
def staff(client, django_user_model):
    user = django_user_model.objects.create_superuser("ops", "ops@example.com", "pw")
    client.force_login(user)
    return client


def run_apply(tmp_path, document, *args):
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump(document))
    out = StringIO()
    call_command("apply", str(path), *args, stdout=out)
    return out.getvalue()


def managers():
    jobs = dict(Job.objects.values_list("name", "managed_by"))
    return jobs, dict(Calendar.objects.values_list("name", "managed_by"))


def test_each_way_in_marks_what_it_makes(tmp_path, api):
    run_apply(tmp_path, FILE)
    api.post("jobs", {"name": "by-api", "schedule": "@daily", "command": "true"})
    JobFactory(name="by-admin")

    assert managers() == (
        {"report": "apply", "heartbeat": "apply", "by-api": "api", "by-admin": "admin"},
        {"ops": "apply"},
    )


def test_apply_takes_over_what_it_lists_and_says_so(tmp_path):
    JobFactory(name="heartbeat", schedule="@every 5m", command="true")

    out = run_apply(tmp_path, {"jobs": [FILE["jobs"][1]]})

    assert "~ job heartbeat: managed_by" in out
    assert Job.objects.get().managed_by == "apply"


def test_the_api_refuses_to_change_an_apply_managed_job_unless_it_adopts_it(tmp_path, api):
    run_apply(tmp_path, FILE)
    before = list(Job.objects.values())

    refused = api.patch("jobs/report", {"command": "python other.py"})

    assert refused.status_code == 409
    assert refused.json() == {
        "detail": "job report is managed by apply of file croniq; pass adopt to take it over"
    }
    assert api.delete("jobs/report").status_code == 409
    assert list(Job.objects.values()) == before
    assert not AuditEvent.objects.filter(action="job.adopted").exists()

    adopted = api.patch("jobs/report", {"command": "python other.py", "adopt": True})

    assert adopted.status_code == 200, adopted.content
    assert (adopted.json()["command"], adopted.json()["managed_by"]) == ("python other.py", "api")
    event = AuditEvent.objects.get(action="job.adopted")
    assert (event.actor_name, event.target_repr) == ("deploy", "report")


def test_pause_and_resume_need_no_adoption(tmp_path, api):
    run_apply(tmp_path, FILE)
    assert api.post("jobs/report/pause").json()["paused"] is True
    assert api.post("jobs/report/resume").json()["paused"] is False
    assert Job.objects.get(name="report").managed_by == "apply"


def test_an_adopted_delete_removes_the_job(tmp_path, api):
    run_apply(tmp_path, FILE)
    assert api.delete("jobs/heartbeat", adopt="true").status_code == 204
    assert not Job.objects.filter(name="heartbeat").exists()
    assert AuditEvent.objects.filter(action__in=["job.adopted", "job.deleted"]).count() == 2


def test_a_calendar_put_adopts_as_a_job_patch_does(tmp_path, api):
    run_apply(tmp_path, FILE)

    assert api.put("calendars/ops", {"weekdays": ["wed"]}).status_code == 409
    assert Calendar.objects.get().weekdays == ["mon", "tue"]
    answer = api.put("calendars/ops", {"weekdays": ["wed"], "adopt": True})

    assert answer.json()["managed_by"] == "api"
    assert AuditEvent.objects.filter(action="calendar.adopted").count() == 1


def test_prune_never_deletes_what_was_adopted_or_made_by_hand(tmp_path, api):
    run_apply(tmp_path, FILE)
    api.patch("jobs/heartbeat", {"adopt": True})
    JobFactory(name="by-admin")
    CalendarFactory(name="by-admin")

    out = run_apply(tmp_path, {"jobs": [], "calendars": []}, "--prune")

    assert "- job report" in out and "- calendar ops" in out
    assert "heartbeat" not in out and "by-admin" not in out
    assert managers() == ({"heartbeat": "api", "by-admin": "admin"}, {"by-admin": "admin"})


def test_the_admin_warns_on_an_apply_managed_job_and_saving_adopts_it(tmp_path, staff):
    run_apply(tmp_path, FILE)
    job = Job.objects.get(name="heartbeat")
    url = reverse("admin:scheduler_job_change", args=[job.pk])

    page = staff.get(url).content.decode()

    assert "managed by apply of file croniq" in page
    assert "the next apply of croniq reverts edits made here" in page
    form = job_form(name="heartbeat", schedule="@every 10m", command="true", timezone="UTC")
    answer = staff.post(url, form)
    assert answer.status_code == 302, answer.content
    job.refresh_from_db()
    assert (job.schedule, job.managed_by) == ("@every 10m", "admin")
    event = AuditEvent.objects.get(action="job.adopted")
    data = {"from": "apply", "to": "admin", "source": "croniq"}
    assert (event.actor_name, event.data) == ("ops", data)
    assert job.managed_source == ""
    assert "managed by apply" not in staff.get(url).content.decode()


def test_the_admin_warns_on_an_apply_managed_calendar_and_saving_adopts_it(tmp_path, staff):
    run_apply(tmp_path, {"calendars": [{"name": "ops", "weekdays": ["mon", "tue"]}]})
    calendar = Calendar.objects.get()
    url = reverse("admin:calendars_calendar_change", args=[calendar.pk])

    assert "managed by apply" in staff.get(url).content.decode()
    answer = staff.post(url, calendar_form())

    assert answer.status_code == 302, answer.content
    calendar.refresh_from_db()
    assert calendar.managed_by == "admin"
    assert AuditEvent.objects.filter(action="calendar.adopted", actor_name="ops").count() == 1


def test_a_job_made_in_the_admin_stays_the_admins(staff):
    staff.post(reverse("admin:scheduler_job_add"), job_form())
    job = Job.objects.get()
    staff.post(reverse("admin:scheduler_job_change", args=[job.pk]), job_form(retries="2"))
    assert Job.objects.get().managed_by == "admin"
    assert not AuditEvent.objects.filter(action="job.adopted").exists()
