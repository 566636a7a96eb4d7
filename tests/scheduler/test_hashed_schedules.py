"""`H` schedules resolved with the job's name wherever a job's schedule is read:
apply, the management API, the loop, next_runs, backfill, the admin (its
preview, a rename) and the job page's words. With the database."""

import datetime as dt
import json
from io import StringIO

import pytest
import time_machine
import yaml
from django.core.management import CommandError, call_command
from django.urls import reverse

from dashboard import schedules
from scheduler.firing import backfill, ticks
from scheduler.jobs.cron import parse_schedule
from scheduler.models import Execution, Job
from tests.admin_forms import job_form
from tests.control.keyed_client import KeyedClient
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)  # a Monday
PREVIEW = "admin:scheduler_job_preview"


def hashed_minute(name, text="H 2 * * *"):
    return parse_schedule(text, key=name).minutes[0]


def apply_file(tmp_path, jobs, err=None):
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump({"jobs": jobs}))
    out = StringIO()
    with time_machine.travel(NOW, tick=False):
        call_command("apply", str(path), stdout=out, stderr=err or StringIO())
    return out.getvalue()


def nightly(name, schedule="H 2 * * *"):
    return {"name": name, "schedule": schedule, "command": "true", "timezone": "UTC"}


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client


def test_apply_resolves_h_with_each_jobs_name(tmp_path):
    names = ["import-orders", "export-invoices", "rebuild-search"]
    apply_file(tmp_path, [nightly(name) for name in names])

    for name in names:
        job = Job.objects.get(name=name)
        assert job.next_run_at == dt.datetime(2026, 6, 2, 2, hashed_minute(name), tzinfo=dt.UTC)
    assert len({Job.objects.get(name=n).next_run_at for n in names}) == 3  # spread, not one


def test_next_runs_shows_the_hashed_minute(tmp_path):
    apply_file(tmp_path, [nightly("import-orders")])
    out = StringIO()
    call_command(
        "next_runs", "import-orders", "--after", NOW.isoformat(), "--count", "2", "--json",
        stdout=out,
    )  # fmt: skip
    minute = hashed_minute("import-orders")
    assert json.loads(out.getvalue()) == [
        f"2026-06-02T02:{minute:02d}:00+00:00",
        f"2026-06-03T02:{minute:02d}:00+00:00",
    ]


def test_apply_refuses_a_backwards_hash_range_naming_the_field(tmp_path):
    err = StringIO()
    with pytest.raises(CommandError):
        apply_file(tmp_path, [nightly("import-orders", "H(50-10) 2 * * *")], err)
    assert "jobs[0].schedule: minute field: range H(50-10) runs backwards" in err.getvalue()
    assert not Job.objects.exists()


def test_the_loop_fires_at_the_hashed_minute():
    minute = hashed_minute("import-orders")
    first = dt.datetime(2026, 6, 2, 2, minute, tzinfo=dt.UTC)
    job = JobFactory(name="import-orders", schedule="H 2 * * *", next_run_at=first)

    assert ticks.trigger_due(first + dt.timedelta(seconds=1)) == 1

    assert Execution.objects.get(job=job).scheduled_for == first
    job.refresh_from_db()
    assert job.next_run_at == first + dt.timedelta(days=1)


def test_backfill_lists_the_hashed_instants():
    job = JobFactory(name="import-orders", schedule="H 2 * * *")
    minute = hashed_minute("import-orders")
    found = backfill.instants_between(job, NOW - dt.timedelta(days=3), NOW)
    assert found == [
        dt.datetime(2026, 5, 30, 2, minute, tzinfo=dt.UTC),
        dt.datetime(2026, 5, 31, 2, minute, tzinfo=dt.UTC),
        dt.datetime(2026, 6, 1, 2, minute, tzinfo=dt.UTC),
    ]


def test_the_job_page_says_the_hashed_time_in_words():
    job = JobFactory(name="import-orders", schedule="H 2 * * *")
    assert schedules.describe(job) == f"At 02:{hashed_minute('import-orders'):02d} AM"


# --- admin -------------------------------------------------------------------------------


def test_the_preview_hashes_the_name_typed_in_the_form(staff):
    query = {"schedule": "H 2 * * *", "timezone": "UTC", "name": "import-orders"}
    with time_machine.travel(NOW, tick=False):
        answer = staff.get(reverse(PREVIEW), query)

    assert answer.status_code == 200
    minute = hashed_minute("import-orders")
    assert answer.json()["entries"][0]["at"] == f"2026-06-02T02:{minute:02d}:00Z"


def test_the_preview_of_a_stored_job_hashes_its_name(staff):
    job = JobFactory(name="export-invoices", schedule="0 3 * * *")
    query = {"schedule": "H 2 * * *", "timezone": "UTC", "job": job.pk}
    with time_machine.travel(NOW, tick=False):
        answer = staff.get(reverse(PREVIEW), query)
    minute = hashed_minute("export-invoices")
    assert answer.json()["entries"][0]["at"] == f"2026-06-02T02:{minute:02d}:00Z"


def test_a_preview_of_h_without_a_name_asks_for_one(staff):
    answer = staff.get(reverse(PREVIEW), {"schedule": "H 2 * * *", "timezone": "UTC"})
    assert answer.status_code == 400
    assert "minute field: H needs the job's name" in answer.json()["error"]


def test_adding_a_job_in_the_admin_resolves_h_with_its_name(staff):
    with time_machine.travel(NOW, tick=False):
        answer = staff.post(
            reverse("admin:scheduler_job_add"),
            job_form(name="import-orders", schedule="H 2 * * *", timezone="UTC"),
        )
    assert answer.status_code == 302
    minute = hashed_minute("import-orders")
    job = Job.objects.get(name="import-orders")
    assert job.next_run_at == dt.datetime(2026, 6, 2, 2, minute, tzinfo=dt.UTC)


def test_renaming_a_job_with_h_moves_it_to_the_new_names_minute(staff):
    old, new = "import-orders", "import-orders-eu"
    assert hashed_minute(old) != hashed_minute(new)
    job = JobFactory(
        name=old,
        schedule="H 2 * * *",
        timezone="UTC",
        next_run_at=dt.datetime(2026, 6, 2, 2, hashed_minute(old), tzinfo=dt.UTC),
    )
    form = job_form(name=new, schedule="H 2 * * *", timezone="UTC", command="true")
    with time_machine.travel(NOW, tick=False):
        preview = staff.get(
            reverse(PREVIEW),
            {"schedule": "H 2 * * *", "timezone": "UTC", "job": job.pk, "name": new},
        )
        staff.post(reverse("admin:scheduler_job_change", args=[job.pk]), form)

    job.refresh_from_db()
    assert job.name == new
    assert job.next_run_at == dt.datetime(2026, 6, 2, 2, hashed_minute(new), tzinfo=dt.UTC)
    assert preview.json()["entries"][0]["at"] == f"2026-06-02T02:{hashed_minute(new):02d}:00Z"


def test_the_management_api_creates_an_h_job_and_lists_its_hashed_instants(client):
    api = KeyedClient(client, ["jobs:read", "jobs:write"])
    with time_machine.travel(NOW, tick=False):
        created = api.post("jobs", nightly("import-orders", "H H(1-3) * * 5L"))
        refused = api.post("jobs", nightly("export-invoices", "0 2 * * 1#6"))
        answer = api.get("jobs/import-orders/next", count=2)

    assert created.status_code == 201, created.content
    assert refused.status_code == 422
    assert "day-of-week field: '1#6'" in refused.json()["detail"]
    schedule = parse_schedule("H H(1-3) * * 5L", key="import-orders")
    hour, minute = schedule.hours[0], schedule.minutes[0]
    assert answer.json()["instants"] == [  # the last Fridays of June and July 2026
        f"2026-06-26T{hour:02d}:{minute:02d}:00+00:00",
        f"2026-07-31T{hour:02d}:{minute:02d}:00+00:00",
    ]
