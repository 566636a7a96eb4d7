"""Job env values named like secrets never show: audit diffs, apply output and
the read-only job page mask them; the job keeps the real values for runners."""

import json
from io import StringIO

import pytest
import yaml
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.urls import reverse

from audit.changes import MASK, diff, is_secret_env, masked_env
from audit.models import AuditEvent
from scheduler.models import Job
from tests import admin_forms
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

SECRET_ENV = {"API_TOKEN": "tok-123456", "DB_PASSWORD": "pw-123456", "REPORT_DIR": "/srv"}
MASKED_ENV = {"API_TOKEN": MASK, "DB_PASSWORD": MASK, "REPORT_DIR": "/srv"}


@pytest.mark.parametrize(
    "name",
    ["API_TOKEN", "DB_PASSWORD", "APP_SECRET", "AWS_SECRET_ACCESS_KEY", "ssh_key", "TOKEN"],
)
def test_names_that_look_secret(name):
    assert is_secret_env(name)


@pytest.mark.parametrize("name", ["PATH", "REPORT_DIR", "KEYBOARD", "TOKENS_DIR", "MONKEY"])
def test_names_that_do_not(name):
    assert not is_secret_env(name)


def test_a_diff_masks_secret_env_values_on_both_sides_and_still_shows_the_change():
    old = {"env": {"API_TOKEN": "old-value"}, "command": "a"}
    new = {"env": {"API_TOKEN": "new-value"}, "command": "a"}
    assert diff(old, new) == {"env": [{"API_TOKEN": MASK}, {"API_TOKEN": MASK}]}
    assert masked_env("not a mapping") == "not a mapping"


# -- the admin -------------------------------------------------------------


@pytest.fixture
def superuser(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client


def job_form(job, **overrides):
    stored = {
        "name": job.name,
        "command": job.command,
        "env": json.dumps(job.env),
        "schedule": job.schedule,
        "timezone": job.timezone,
    }
    return admin_forms.job_form(**{**stored, **overrides})


def test_an_admin_change_of_env_is_audited_with_secrets_masked(superuser):
    job = JobFactory(env={"REPORT_DIR": "/tmp"})
    url = reverse("admin:scheduler_job_change", args=[job.pk])
    answer = superuser.post(url, job_form(job, env=json.dumps(SECRET_ENV)))
    assert answer.status_code == 302, answer.content.decode()[:2000]
    event = AuditEvent.objects.get(action="job.changed")
    assert event.data["env"] == [{"REPORT_DIR": "/tmp"}, MASKED_ENV]
    assert "tok-123456" not in json.dumps(event.data)
    job.refresh_from_db()
    assert job.env == SECRET_ENV  # what runners get


def test_a_viewer_sees_the_job_env_masked(client, django_user_model):
    job = JobFactory(env=SECRET_ENV)
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(viewer)
    page = client.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert "REPORT_DIR" in page and "/srv" in page
    assert MASK in page
    assert "tok-123456" not in page and "pw-123456" not in page


def test_an_editor_still_edits_the_real_values(superuser):
    job = JobFactory(env=SECRET_ENV)
    page = superuser.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert "tok-123456" in page  # in the form's env field, to be edited


# -- apply -----------------------------------------------------------------


def apply(tmp_path, env, *args):
    path = tmp_path / "croniq.yaml"
    document = {"jobs": [{"name": "report", "schedule": "@daily", "command": "x", "env": env}]}
    path.write_text(yaml.safe_dump(document))
    out = StringIO()
    call_command("apply", str(path), *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_apply_prints_and_audits_secret_env_values_masked(tmp_path):
    out = apply(tmp_path, SECRET_ENV, "--json")
    assert json.loads(out)[0]["diff"]["env"] == [None, MASKED_ENV]
    assert "tok-123456" not in out
    event = AuditEvent.objects.get(action="job.created")
    assert event.data["diff"]["env"] == [None, MASKED_ENV]
    assert Job.objects.get(name="report").env == SECRET_ENV


def test_apply_still_applies_a_change_of_only_a_secret_value(tmp_path):
    apply(tmp_path, SECRET_ENV)
    rotated = {**SECRET_ENV, "API_TOKEN": "tok-rotated"}
    out = apply(tmp_path, rotated, "--json")
    assert json.loads(out)[0]["action"] == "update"
    assert "tok-rotated" not in out
    assert Job.objects.get(name="report").env == rotated
