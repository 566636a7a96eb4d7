"""`${secret:NAME}` in a job's env (docs/design.md §11): an unknown name is
refused at apply, in the API and in the admin, naming the variable; a known
one is stored and shown as the reference, never as its value."""

import datetime as dt

import pytest
from django.contrib.auth.models import User

from audit.models import AuditEvent
from scheduler.apply.document import ApplyError, apply
from scheduler.models import Job
from tests.control.calls import LAST_USED, fingerprint
from tests.control.keyed_client import KeyedClient
from vault import store

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
VALUE = "hunter2-but-longer"
REFERENCE = "${secret:db-password}"


def job(env):
    return {"name": "sync", "schedule": "@hourly", "command": "./sync", "env": env}


@pytest.fixture
def stored():
    store.put("db-password", VALUE, actor=None, now=NOW)


def test_apply_refuses_an_unknown_secret_naming_the_variable():
    with pytest.raises(ApplyError) as refused:
        apply({"jobs": [job({"DB_PASSWORD": REFERENCE})]}, now=NOW)
    assert refused.value.errors == ['jobs[0].env.DB_PASSWORD: unknown secret "db-password"']
    assert not Job.objects.exists()


def test_apply_refuses_a_malformed_reference():
    with pytest.raises(ApplyError) as refused:
        apply({"jobs": [job({"URL": "https://x/${secret:bad name}"})]}, now=NOW)
    assert refused.value.errors[0].startswith("jobs[0].env.URL: ")
    assert "is not a secret name" in refused.value.errors[0]


def test_a_known_reference_is_stored_as_the_reference(stored):
    apply(
        {"jobs": [job({"DB_PASSWORD": REFERENCE, "DSN": "pg://u:${secret:db-password}@h"})]},
        now=NOW,
    )
    assert Job.objects.get().env == {
        "DB_PASSWORD": REFERENCE,
        "DSN": "pg://u:${secret:db-password}@h",
    }
    assert VALUE not in str(list(AuditEvent.objects.values_list("data", flat=True)))


def test_the_api_refuses_an_unknown_secret_and_changes_nothing(client):
    writer = KeyedClient(client, ["jobs:read", "jobs:write"])
    before = fingerprint(ignore={LAST_USED})
    answer = writer.post("jobs", job({"DB_PASSWORD": REFERENCE}))
    assert answer.status_code == 422
    assert 'env.DB_PASSWORD: unknown secret "db-password"' in answer.json()["detail"]
    assert fingerprint(ignore={LAST_USED}) == before


def test_the_api_shows_the_reference_not_a_mask_and_never_the_value(client, stored):
    writer = KeyedClient(client, ["jobs:read", "jobs:write"])
    assert (
        writer.post("jobs", job({"DB_PASSWORD": REFERENCE, "API_TOKEN": "literal"})).status_code
        == 201
    )
    shown = writer.get("jobs/sync")
    assert shown.json()["env"] == {"DB_PASSWORD": REFERENCE, "API_TOKEN": "********"}
    assert VALUE.encode() not in shown.content
    # Read-modify-write keeps the reference.
    writer.patch("jobs/sync", {"env": shown.json()["env"]})
    assert Job.objects.get().env["DB_PASSWORD"] == REFERENCE


def test_the_job_admin_refuses_an_unknown_secret(client):
    admin = User.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    answer = client.post(
        "/admin/scheduler/job/add/",
        {
            "name": "sync",
            "command": "./sync",
            "schedules": '["@hourly"]',
            "timezone": "UTC",
            "env": '{"DB_PASSWORD": "${secret:db-password}"}',
        },
    )
    assert answer.status_code == 200  # the form again, with the error
    assert "unknown secret &quot;db-password&quot;" in answer.content.decode()
    assert not Job.objects.exists()


def test_the_database_check_names_stored_jobs_whose_secret_the_store_lacks(stored):
    from django.core import checks

    from scheduler.jobs.secret_checks import UNKNOWN_SECRET

    # Stored before the store existed (or its secret deleted since): no check ran.
    Job.objects.bulk_create(
        [
            Job(name="old", command="x", schedule="@hourly", env={"T": "${secret:gone}"}),
            Job(name="fine", command="x", schedule="@hourly", env={"T": REFERENCE}),
        ]
    )
    found = [m for m in checks.run_checks(databases=["default"]) if m.id == UNKNOWN_SECRET]
    assert [m.msg for m in found] == ["job 'old': env.T: unknown secret \"gone\""]


def test_the_database_check_names_an_http_jobs_references_the_store_lacks(stored):
    from django.core import checks

    from scheduler.jobs.secret_checks import UNKNOWN_SECRET

    request = {
        "method": "POST",
        "url": "https://api.example.com/${secret:gone-path}/hook",
        "headers": {"Authorization": "Bearer ${secret:gone-token}", "X-Known": REFERENCE},
        "body": '{"key": "${secret:Not A Name}"}',
        "expect_status": [],
        "timeout": None,
    }
    # Written before its secrets were deleted, or by hand: no check ran.
    Job.objects.bulk_create(
        [
            Job(name="hook", kind=Job.HTTP, schedule="@hourly", http=request),
            Job(
                name="fine",
                kind=Job.HTTP,
                schedule="@hourly",
                http={**request, "url": "http://x/", "headers": {"X-Known": REFERENCE}, "body": ""},
            ),  # fmt: skip
        ]
    )
    found = [m for m in checks.run_checks(databases=["default"]) if m.id == UNKNOWN_SECRET]
    assert sorted(m.msg for m in found) == [
        "job 'hook': http.body: '${secret:Not A Name}' is not a secret name",
        "job 'hook': http.headers.Authorization: unknown secret \"gone-token\"",
        "job 'hook': http.url: unknown secret \"gone-path\"",
    ]
    assert "http request" in found[0].hint
