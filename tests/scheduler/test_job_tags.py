"""A job's `tags` (docs/design.md §17): short slugs operators find and act
on jobs by. Apply, the management API and the admin take them, check them
alike (errors naming the entry: `jobs[0].tags[1]`), show them and audit
their changes; the API's job list and the admin's list filter select by one."""

import datetime as dt

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.urls import reverse

from audit.models import AuditEvent
from scheduler.apply.document import ApplyError, apply
from scheduler.jobs import tags
from scheduler.models import Job
from tests.admin_forms import job_form
from tests.control.keyed_client import KeyedClient
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def job_item(**fields):
    return {"name": "report", "schedule": "30 2 * * *", "command": "python report.py", **fields}


def applied(*items):
    return apply({"jobs": list(items)}, now=NOW)


def refusal(*items):
    with pytest.raises(ApplyError) as refused:
        applied(*items)
    return refused.value.errors


# -- what a tag is ----------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [[], ["billing"], ["team-data", "v1.2", "a_b", "0day"], ["x" * 50], ["t"] * 1]
)
def test_slugs_of_up_to_fifty_characters_are_tags(value):
    assert tags.problem(value) is None


@pytest.mark.parametrize(
    ("value", "where", "says"),
    [
        ("billing", "", "expected a list"),
        (["billing", "Nightly"], "[1]", "'Nightly' is not a tag"),
        (["-x"], "[0]", "is not a tag"),
        (["has space"], "[0]", "is not a tag"),
        (["x" * 51], "[0]", "is not a tag"),
        ([""], "[0]", "is not a tag"),
        ([7], "[0]", "7 is not a tag"),
        (["a", "b", "a"], "[2]", "'a' is listed twice"),
        ([f"t{i}" for i in range(21)], "", "at most 20 tags (got 21)"),
    ],
)
def test_anything_else_is_refused_naming_the_entry(value, where, says):
    found_where, message = tags.problem(value)
    assert found_where == where
    assert says in message


def test_the_models_check_names_the_entry_as_apply_does():
    job = JobFactory.build(name="report", tags=["ok", "Not OK"])
    with pytest.raises(ValidationError) as refused:
        job.full_clean()
    assert refused.value.message_dict["tags"] == [
        "[1]: 'Not OK' is not a tag: a tag is 1 to 50 lower-case letters, digits, '.', "
        "'_' and '-', starting with a letter or digit"
    ]


# -- apply --------------------------------------------------------------------------


def test_apply_stores_tags_and_a_second_apply_changes_nothing():
    [change] = applied(job_item(tags=["billing", "nightly"]))
    assert change.action == "create"
    assert Job.objects.get(name="report").tags == ["billing", "nightly"]
    [again] = applied(job_item(tags=["billing", "nightly"]))
    assert again.action == "unchanged"


def test_apply_refuses_a_bad_tag_naming_the_item_and_the_entry():
    errors = refusal(job_item(tags=["billing", "Bad Tag"]))
    assert errors == [
        "jobs[0].tags[1]: 'Bad Tag' is not a tag: a tag is 1 to 50 lower-case letters, "
        "digits, '.', '_' and '-', starting with a letter or digit"
    ]
    assert not Job.objects.exists()
    assert refusal(job_item(tags="billing")) == [
        "jobs[0].tags: expected a list of tags like [billing, nightly]"
    ]
    assert refusal(job_item(tags=[f"t{i}" for i in range(21)])) == [
        "jobs[0].tags: at most 20 tags (got 21)"
    ]


def test_a_change_of_tags_is_in_the_plan_and_the_audit_trail():
    applied(job_item(tags=["billing"]))
    [change] = applied(job_item(tags=["billing", "nightly"]))
    assert change.action == "update"
    assert change.diff == {"tags": [["billing"], ["billing", "nightly"]]}
    event = AuditEvent.objects.filter(action="job.changed").latest("id")
    assert event.data["diff"]["tags"] == [["billing"], ["billing", "nightly"]]


def test_a_document_without_tags_leaves_a_job_without_any():
    applied(job_item())
    assert Job.objects.get(name="report").tags == []


# -- the management API -------------------------------------------------------------


@pytest.fixture
def api(client):
    return KeyedClient(client, ["jobs:read", "jobs:write"])


def test_the_api_creates_reads_and_changes_tags(api):
    created = api.post("jobs", job_item(tags=["billing"]))
    assert created.status_code == 201, created.content
    assert created.json()["tags"] == ["billing"]
    assert api.get("jobs/report").json()["tags"] == ["billing"]
    changed = api.patch("jobs/report", {"tags": ["billing", "eu"]})
    assert changed.status_code == 200, changed.content
    assert changed.json()["tags"] == ["billing", "eu"]
    event = AuditEvent.objects.filter(action="job.changed").latest("id")
    assert event.data["diff"]["tags"] == [["billing"], ["billing", "eu"]]
    # A change that leaves tags out keeps them.
    api.patch("jobs/report", {"retries": 2})
    assert Job.objects.get(name="report").tags == ["billing", "eu"]


def test_the_api_refuses_a_bad_tag_naming_the_entry(api):
    answer = api.post("jobs", job_item(tags=["ok", "NO"]))
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith("tags[1]: 'NO' is not a tag")
    assert not Job.objects.exists()
    JobFactory(name="report", tags=["ok"])
    answer = api.patch("jobs/report", {"tags": ["ok", "ok"]})
    assert answer.status_code == 422
    assert answer.json()["detail"] == "tags[1]: 'ok' is listed twice"
    assert Job.objects.get(name="report").tags == ["ok"]


def test_the_api_lists_the_jobs_carrying_a_tag(api):
    JobFactory(name="invoice", tags=["billing", "nightly"])
    JobFactory(name="refund", tags=["billing"])
    JobFactory(name="backup", tags=["nightly"])
    JobFactory(name="untagged")

    def names(**filters):
        return [job["name"] for job in api.get("jobs", **filters).json()["items"]]

    assert names(tag="billing") == ["invoice", "refund"]
    assert names(tag="nightly") == ["backup", "invoice"]
    assert names(tag="bill") == []  # a whole tag, not a part of one
    assert names(tag="nightly", name="b") == ["backup"]
    assert names() == ["backup", "invoice", "refund", "untagged"]


# -- the admin ----------------------------------------------------------------------


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("ops", "ops@x.org", "pw"))
    return client


def test_the_admin_form_takes_tags_and_audits_their_change(staff):
    answer = staff.post(reverse("admin:scheduler_job_add"), job_form(tags="billing, nightly"))
    assert answer.status_code == 302, answer.content.decode()[:2000]
    job = Job.objects.get(name="report")
    assert job.tags == ["billing", "nightly"]
    url = reverse("admin:scheduler_job_change", args=[job.pk])
    assert staff.post(url, job_form(tags="billing")).status_code == 302
    event = AuditEvent.objects.get(action="job.changed")
    assert event.data["tags"] == [["billing", "nightly"], ["billing"]]


def test_the_admin_form_refuses_a_bad_tag_as_apply_does(staff):
    answer = staff.post(reverse("admin:scheduler_job_add"), job_form(tags="billing, Nightly"))
    assert answer.status_code == 200
    assert "[1]: &#x27;Nightly&#x27; is not a tag" in answer.content.decode()
    assert not Job.objects.exists()


def test_the_admin_lists_jobs_by_tag(staff):
    JobFactory(name="invoice", tags=["billing"])
    JobFactory(name="backup", tags=["nightly"])
    changelist = reverse("admin:scheduler_job_changelist")
    page = staff.get(changelist).content.decode()
    # The sidebar offers the tags in use.
    assert "?tag=billing" in page and "?tag=nightly" in page
    listed = staff.get(changelist, {"tag": "billing"}).content.decode()
    assert "invoice" in listed and "backup" not in listed
