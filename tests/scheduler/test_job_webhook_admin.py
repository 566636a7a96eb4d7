"""A job's webhook in the admin (docs/design.md §14): turned on in the job
form, its URL shown only to who may change the job, a new URL by an action,
and the key behind it kept out of the audit trail."""

import json

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from audit.models import AuditEvent
from scheduler.models import Job
from tests.admin_forms import job_form
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("ops", "ops@x.example", "pw"))
    return client


def test_a_job_gets_its_url_in_the_form_and_it_shows_on_its_page(staff):
    form = job_form(schedule="", webhook="on", webhook_secret="")
    answer = staff.post(reverse("admin:scheduler_job_add"), form)

    assert answer.status_code == 302, answer.content.decode()[:2000]
    job = Job.objects.get(name="report")
    page = staff.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert job.webhook_url in page
    audited = json.dumps(list(AuditEvent.objects.values("data")))
    assert job.webhook_key not in audited and "webhook_key" not in audited


def test_who_may_only_view_jobs_never_sees_the_url(client, django_user_model):
    job = JobFactory(webhook=True)
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(viewer)

    page = client.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()

    assert job.name in page
    assert job.webhook_key not in page


def test_the_action_gives_a_new_url_and_audits_it(staff):
    job = JobFactory(webhook=True)
    plain = JobFactory()
    old = job.webhook_url
    answer = staff.post(
        reverse("admin:scheduler_job_changelist"),
        {"action": "regenerate_webhooks", "_selected_action": [job.pk, plain.pk]},
    )

    assert answer.status_code == 302
    job.refresh_from_db()
    assert job.webhook_url not in (None, old)
    assert Job.objects.get(pk=plain.pk).webhook_url is None
    event = AuditEvent.objects.get(action="job.webhook_regenerated")
    assert (event.target_id, event.actor_name) == (str(job.pk), "ops")


def test_turning_the_webhook_off_in_the_form_forgets_the_url(staff):
    job = JobFactory(name="report", webhook=True)
    url = reverse("admin:scheduler_job_change", args=[job.pk])

    answer = staff.post(url, job_form(webhook_secret=""))

    assert answer.status_code == 302, answer.content.decode()[:2000]
    job.refresh_from_db()
    assert (job.webhook, job.webhook_key, job.webhook_url) == (False, None, None)
