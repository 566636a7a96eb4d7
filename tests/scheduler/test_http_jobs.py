"""Jobs of kind http (docs/design.md §15) as the model, apply, export and
the admin take them: the request checked field by field, errors naming
`jobs[0].http.url` and the like, its secrets as references, and headers
named like secrets kept out of the audit trail."""

import datetime as dt
import json
from io import StringIO

import pytest
import yaml
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse

from audit.models import AuditEvent
from runners.models import Runner
from scheduler.admin.forms import JobAdminForm
from scheduler.apply.document import ApplyError, apply
from scheduler.apply.export import export
from scheduler.models import Job
from tests.admin_forms import job_form
from tests.scheduler.test_admin_forms import posted
from vault import store

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
URL = "https://hooks.example.com/refresh"
MASK = "********"


def http_job(**fields):
    item = {"name": "refresh", "schedule": "@hourly", "kind": "http", "http": {"url": URL}}
    return {**item, **fields}


def typed(**request):
    """The request as typed into the admin's field: JSON."""
    return json.dumps(request)


def applied(**fields):
    apply({"jobs": [http_job(**fields)]}, now=NOW)
    return Job.objects.get(name="refresh")


def apply_errors(item):
    with pytest.raises(ApplyError) as refused:
        apply({"jobs": [item]}, now=NOW, dry_run=True)
    return refused.value.errors


def request_errors(**request):
    return apply_errors(http_job(http=request))


def refusal(**fields):
    job = Job(name="refresh", schedule="@daily", **fields)
    with pytest.raises(ValidationError) as refused:
        job.full_clean()
    return refused.value.message_dict


# -- the model's checks ---------------------------------------------------------------


def test_a_shell_job_needs_its_command_and_no_request():
    assert refusal(command="")["command"] == ["required: the shell command the runner runs (sh -c)"]
    assert refusal(command="true", http={"url": URL})["http"] == ["only with kind: http"]


def test_an_http_job_needs_its_request_and_nothing_a_shell_job_runs():
    assert refusal(kind="http")["http"] == [
        "required with kind: http: a mapping with the request's url"
    ]
    refused = refusal(
        kind="http", http={"url": URL}, command="curl x", stdin="x", env={"A": "1"}, run_as="web"
    )
    only_shell = ["only with kind: shell (an http job starts no process)"]
    assert {name: refused[name] for name in ("command", "stdin", "env", "run_as")} == {
        name: only_shell for name in ("command", "stdin", "env", "run_as")
    }
    Job(name="refresh", schedule="@daily", kind="http", http={"url": URL}).full_clean()


def test_an_http_job_needs_the_agents_http_feature():
    job = Job(name="refresh", kind="http", http={"url": URL}, labels=["linux"])
    assert job.features == {"http"}
    assert Job(name="plain", command="true").features == frozenset()


# -- apply ----------------------------------------------------------------------------


def test_apply_stores_the_request_with_its_defaults_and_a_second_apply_changes_nothing():
    job = applied()
    assert (job.kind, job.command) == ("http", "")
    assert job.http == {
        "method": "GET",
        "url": URL,
        "headers": {},
        "body": "",
        "expect_status": [],
        "timeout": None,
    }
    again = apply({"jobs": [http_job()]}, now=NOW)
    assert [c.action for c in again] == ["unchanged"]


def test_apply_takes_every_field_of_the_request():
    request = {
        "method": "post",
        "url": URL,
        "headers": {"Content-Type": "application/json", "X-Count": 3},
        "body": '{"full": true}',
        "expect_status": [204, 200, 204],
        "timeout": "30s",
    }
    job = applied(http=request, timeout=60)
    assert job.http == {
        "method": "POST",
        "url": URL,
        "headers": {"Content-Type": "application/json", "X-Count": "3"},
        "body": '{"full": true}',
        "expect_status": [200, 204],
        "timeout": 30,
    }


@pytest.mark.parametrize(
    ("request_fields", "error"),
    [
        ({}, "jobs[0].http: required with kind: http: a mapping with the request's url"),
        ({"method": "GET"}, "jobs[0].http.url: required: the URL to request"),
        ({"url": "ftp://files.example.com/x"}, "jobs[0].http.url: 'ftp://files.example.com/x' is"),
        ({"url": "https:///path"}, "jobs[0].http.url: 'https:///path' is not a URL"),
        ({"url": "https://a.example.com/x y"}, "jobs[0].http.url: a URL holds no spaces"),
        (
            {"url": "https://a.example.com:80x/"},
            "jobs[0].http.url: 'https://a.example.com:80x/' has",
        ),
        ({"url": URL, "method": "FETCH"}, "jobs[0].http.method: 'FETCH' is not one of GET, HEAD"),
        ({"url": URL, "headers": ["Accept"]}, "jobs[0].http.headers: expected a mapping"),
        ({"url": URL, "headers": {"Bad Name": "x"}}, "jobs[0].http.headers: 'Bad Name' is not"),
        ({"url": URL, "headers": {"X-A": "1\r\nX-B: 2"}}, "jobs[0].http.headers.X-A: a header's"),
        ({"url": URL, "headers": {"X-A": " 1"}}, "jobs[0].http.headers.X-A: a header's value does"),
        (
            {"url": URL, "headers": {"Accept": "a", "accept": "b"}},
            "jobs[0].http.headers.accept: set twice (as Accept)",
        ),
        ({"url": URL, "body": {"a": 1}}, "jobs[0].http.body: expected text"),
        ({"url": URL, "body": "x" * 65537}, "jobs[0].http.body: at most 65536 bytes (got 65537)"),
        ({"url": URL, "expect_status": 200}, "jobs[0].http.expect_status: expected a list"),
        ({"url": URL, "expect_status": [200, 99]}, "jobs[0].http.expect_status[1]: 99 is not"),
        ({"url": URL, "expect_status": [True]}, "jobs[0].http.expect_status[0]: True is not"),
        ({"url": URL, "timeout": 0}, "jobs[0].http.timeout: must be at least 1 second(s)"),
        ({"url": URL, "timeout": "soon"}, "jobs[0].http.timeout: 'soon' is not a duration"),
        ({"url": URL, "follow": True}, "jobs[0].http: unknown field(s): follow"),
    ],
)
def test_apply_names_the_field_of_the_request_it_refuses(request_fields, error):
    [refused] = (
        request_errors(**request_fields) if request_fields else apply_errors(http_job(http={}))
    )
    assert refused.startswith(error), refused


def test_the_requests_timeout_is_at_most_the_jobs():
    [refused] = apply_errors(http_job(http={"url": URL, "timeout": 90}, timeout=60))
    assert refused == "jobs[0].http.timeout: at most the job's timeout (60s), got 90"
    assert applied(http={"url": URL, "timeout": 60}, timeout=60).http["timeout"] == 60


def test_apply_refuses_the_kinds_fields_where_they_do_not_belong():
    assert apply_errors(http_job(command="curl -X POST x")) == [
        "jobs[0].command: only with kind: shell (an http job starts no process)"
    ]
    shell = {"name": "report", "schedule": "@daily", "command": "true", "http": {"url": URL}}
    assert apply_errors(shell) == ["jobs[0].http: only with kind: http"]
    assert apply_errors({"name": "report", "schedule": "@daily"}) == [
        "jobs[0].command: required: the shell command the runner runs (sh -c)"
    ]
    [refused] = apply_errors(http_job(kind="ftp"))
    assert refused.startswith("jobs[0].kind: ")


def test_a_request_may_name_stored_secrets_and_an_unknown_one_is_refused():
    request = {
        "url": "https://hooks.example.com/${secret:hook-path}",
        "headers": {"Authorization": "Bearer ${secret:api-token}"},
        "body": "token=${secret:api-token}",
    }
    assert request_errors(**request) == [
        'jobs[0].http.url: unknown secret "hook-path"',
        'jobs[0].http.body: unknown secret "api-token"',
        'jobs[0].http.headers.Authorization: unknown secret "api-token"',
    ]
    store.put("hook-path", "p-1234", actor=None, now=NOW)
    store.put("api-token", "t-5678", actor=None, now=NOW)
    job = applied(http=request)
    # The job keeps the references; the values are read only at claim.
    assert job.http["headers"] == {"Authorization": "Bearer ${secret:api-token}"}
    assert job.http["url"] == "https://hooks.example.com/${secret:hook-path}"


def test_apply_switches_a_job_between_kinds():
    apply({"jobs": [{"name": "refresh", "schedule": "@hourly", "command": "curl x"}]}, now=NOW)
    assert applied().kind == "http"
    apply({"jobs": [{"name": "refresh", "schedule": "@hourly", "command": "curl x"}]}, now=NOW)
    job = Job.objects.get(name="refresh")
    assert (job.kind, job.command, job.http) == ("shell", "curl x", {})


def test_the_plan_and_the_audit_trail_mask_a_secret_looking_header():
    headers = {"Authorization": "Bearer plain-credential", "X-Team": "data"}
    changes = apply({"jobs": [http_job(http={"url": URL, "headers": headers})]}, now=NOW)
    [created] = changes
    assert created.diff["http"][1]["headers"] == {"Authorization": MASK, "X-Team": "data"}
    [event] = AuditEvent.objects.filter(action="job.created")
    assert "plain-credential" not in str(event.data)
    assert Job.objects.get(name="refresh").http["headers"] == headers


def test_apply_warns_when_only_agents_without_http_carry_the_jobs_labels(tmp_path):
    Runner.objects.create(
        name="web-1", labels=["linux"], session="s", registered_at=NOW, last_seen_at=NOW,
        version="0.2.0", features=["stdin", "run_as"],
    )  # fmt: skip
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump({"jobs": [http_job(labels=["linux"])]}))
    err = StringIO()
    call_command("apply", str(path), stdout=StringIO(), stderr=err)
    assert err.getvalue().splitlines() == [
        "warning: job refresh: the job needs http, which the agents of the runners with "
        "labels linux do not support: web-1 (0.2.0); upgrade croniq-runner; its runs wait "
        "until one registers"
    ]
    Runner.objects.filter(name="web-1").update(features=["http", "run_as", "stdin"])
    err = StringIO()
    call_command("apply", str(path), stdout=StringIO(), stderr=err)
    assert err.getvalue() == ""


# -- export ---------------------------------------------------------------------------


def test_the_export_writes_the_request_without_its_defaults():
    applied(http={"url": URL, "method": "POST", "expect_status": [204]})
    [item] = export().document["jobs"]
    assert item["kind"] == "http"
    assert "command" not in item
    assert item["http"] == {"method": "POST", "url": URL, "expect_status": [204]}


def test_the_export_warns_of_a_secret_looking_header_but_not_of_a_reference():
    store.put("api-token", "t-5678", actor=None, now=NOW)
    headers = {
        "X-Api-Key": "k-1",
        "Cookie": "${secret:api-token}",
        "Authorization": "Bearer ${secret:api-token}",
    }
    applied(http={"url": URL, "headers": headers})
    warnings = export().warnings
    assert warnings == [
        "job refresh: http header X-Api-Key is written out as stored and looks like a secret: "
        "do not commit the file as it is (or write ${secret:NAME} instead)"
    ]


# -- the admin ------------------------------------------------------------------------


def test_the_admin_form_saves_an_http_job():
    data = job_form(kind="http", command="", http=typed(url=URL, method="PUT"))
    form = JobAdminForm(data=posted(data))
    assert form.is_valid(), form.errors
    job = form.save()
    assert (job.kind, job.http["method"], job.http["url"]) == ("http", "PUT", URL)


@pytest.mark.parametrize(
    ("typed", "error"),
    [
        ('{"url": "ftp://x"}', "url: 'ftp://x' is not a URL starting http:// or https://"),
        (typed(url=URL, timeout=90), "timeout: at most the job's timeout (60s), got 90"),
        ("{not json", 'not JSON: {"url": "https://...", ...}'),
    ],
)
def test_the_admin_form_refuses_a_bad_request_on_its_field(typed, error):
    form = JobAdminForm(data=posted(job_form(kind="http", command="", http=typed, timeout="60")))
    assert not form.is_valid()
    assert list(form.errors) == ["http"]
    assert form.errors["http"][0].startswith(error), form.errors["http"]


def test_the_admin_form_refuses_a_command_on_an_http_job():
    form = JobAdminForm(data=posted(job_form(kind="http", http=typed(url=URL))))
    assert not form.is_valid()
    assert form.errors["command"] == ["only with kind: shell (an http job starts no process)"]


def test_a_post_without_a_kind_is_a_shell_job():
    form = JobAdminForm(data=posted(job_form()))
    assert form.is_valid(), form.errors
    assert form.save().kind == "shell"


def test_the_job_admin_keeps_a_secret_looking_header_out_of_its_audit_trail(admin_client):
    request = typed(url=URL, headers={"Authorization": "Bearer plain-credential"})
    form = job_form(kind="http", command="", http=request)
    answer = admin_client.post(reverse("admin:scheduler_job_add"), form, follow=True)
    assert answer.status_code == 200
    job = Job.objects.get(name="report")
    assert job.http["headers"] == {"Authorization": "Bearer plain-credential"}
    page = admin_client.get(reverse("admin:scheduler_job_change", args=[job.pk]))
    assert page.status_code == 200
    changed = {**job_form(kind="http", command="", timeout="30"), "http": request}
    admin_client.post(reverse("admin:scheduler_job_change", args=[job.pk]), changed)
    assert Job.objects.get(pk=job.pk).timeout == 30
    admin_client.post(reverse("admin:scheduler_job_delete", args=[job.pk]), {"post": "yes"})
    assert not Job.objects.filter(pk=job.pk).exists()
    events = AuditEvent.objects.filter(action__startswith="job.")
    assert events.count() >= 2
    assert all("plain-credential" not in str(event.data) for event in events)


def test_who_may_only_view_the_job_sees_a_secret_looking_header_masked(client, django_user_model):
    headers = {"Authorization": "Bearer plain-credential", "X-Team": "data"}
    job = applied(http={"url": URL, "headers": headers})
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(viewer)
    page = client.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert URL in page and "X-Team" in page
    assert "plain-credential" not in page
    assert MASK in page
