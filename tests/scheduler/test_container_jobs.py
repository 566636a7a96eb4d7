"""Jobs of kind container (docs/design.md §15) as the model, apply, export
and the admin take them: the container checked field by field, errors
naming `jobs[0].container.image` and the like, its env's secrets as
references, and its env's secret-looking values kept out of the audit
trail and the pages of who may only view it."""

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
IMAGE = "registry.example.com/data/reports:1.4"
MASK = "********"


def container_job(**fields):
    item = {"name": "render", "schedule": "@daily", "kind": "container"}
    return {**item, "container": {"image": IMAGE}, **fields}


def applied(**fields):
    apply({"jobs": [container_job(**fields)]}, now=NOW)
    return Job.objects.get(name="render")


def apply_errors(item):
    with pytest.raises(ApplyError) as refused:
        apply({"jobs": [item]}, now=NOW, dry_run=True)
    return refused.value.errors


def container_errors(**container):
    return apply_errors(container_job(container=container))


def refusal(**fields):
    job = Job(name="render", schedule="@daily", **fields)
    with pytest.raises(ValidationError) as refused:
        job.full_clean()
    return refused.value.message_dict


# -- the model's checks ---------------------------------------------------------------


def test_a_container_job_needs_its_image_and_nothing_a_shell_job_runs():
    assert refusal(kind="container")["container"] == [
        "required with kind: container: a mapping with the image to run"
    ]
    refused = refusal(
        kind="container", container={"image": IMAGE}, command="x", stdin="x", env={"A": "1"}
    )
    only_shell = ["only with kind: shell (a container job runs its image: see container)"]
    assert {name: refused[name] for name in ("command", "stdin", "env")} == {
        name: only_shell for name in ("command", "stdin", "env")
    }
    assert refusal(command="true", container={"image": IMAGE})["container"] == [
        "only with kind: container"
    ]
    assert refusal(kind="http", http={"url": "https://x.example.com"}, container={"image": IMAGE})[
        "container"
    ] == ["only with kind: container"]
    Job(name="render", schedule="@daily", kind="container", container={"image": IMAGE}).full_clean()


def test_a_container_job_needs_the_agents_container_feature():
    job = Job(name="render", kind="container", container={"image": IMAGE}, labels=["linux"])
    assert job.features == {"container"}


# -- apply ----------------------------------------------------------------------------


def test_apply_stores_the_container_with_its_defaults_and_a_second_apply_changes_nothing():
    job = applied()
    assert (job.kind, job.command, job.http) == ("container", "", {})
    assert job.container == {
        "image": IMAGE,
        "args": [],
        "env": {},
        "pull": "missing",
        "network": None,
    }
    again = apply({"jobs": [container_job()]}, now=NOW)
    assert [c.action for c in again] == ["unchanged"]


def test_apply_takes_every_field_of_the_container():
    container = {
        "image": "alpine@sha256:" + "a" * 64,
        "args": ["sh", "-c", "echo $GREETING", 7],
        "env": {"GREETING": "hello world", "RETRIES": 3},
        "pull": "never",
        "network": "none",
    }
    assert applied(container=container).container == {
        "image": "alpine@sha256:" + "a" * 64,
        "args": ["sh", "-c", "echo $GREETING", "7"],
        "env": {"GREETING": "hello world", "RETRIES": "3"},
        "pull": "never",
        "network": "none",
    }


@pytest.mark.parametrize(
    ("container", "error"),
    [
        (None, "jobs[0].container: required with kind: container: a mapping with the image"),
        ({"pull": "never"}, "jobs[0].container.image: required: the image to run"),
        ({"image": "-v /:/host"}, "jobs[0].container.image: '-v /:/host' is not an image"),
        ({"image": "alpine latest"}, "jobs[0].container.image: 'alpine latest' is not an image"),
        ({"image": ["alpine"]}, "jobs[0].container.image: expected an image reference"),
        ({"image": IMAGE, "args": "python x.py"}, "jobs[0].container.args: expected a list"),
        ({"image": IMAGE, "args": ["x", {"a": 1}]}, "jobs[0].container.args[1]: expected text"),
        (
            {"image": IMAGE, "args": ["--token=${secret:api-token}"]},
            "jobs[0].container.args[0]: a ${secret:NAME} may stand only in container.env",
        ),
        ({"image": IMAGE, "env": ["A=1"]}, "jobs[0].container.env: expected a mapping"),
        ({"image": IMAGE, "env": {"A B": "1"}}, "jobs[0].container.env: 'A B' is not an env"),
        ({"image": IMAGE, "env": {"1A": "1"}}, "jobs[0].container.env: '1A' is not an env"),
        (
            {"image": IMAGE, "env": {"PEM": "a\nb"}},
            "jobs[0].container.env.PEM: a value is one line",
        ),
        ({"image": IMAGE, "pull": "sometimes"}, "jobs[0].container.pull: 'sometimes' is not one"),
        ({"image": IMAGE, "network": "overlay"}, "jobs[0].container.network: 'overlay' is not"),
        ({"image": IMAGE, "volumes": ["/:/host"]}, "jobs[0].container: unknown field(s): volumes"),
        (
            {"image": IMAGE, "args": ["x" * 70_000]},
            "jobs[0].container: at most 65536 bytes of args and env together (got 70000)",
        ),
    ],
)
def test_apply_names_the_field_of_the_container_it_refuses(container, error):
    [refused] = apply_errors(container_job(container=container))
    assert refused.startswith(error), refused


def test_apply_refuses_the_kinds_fields_where_they_do_not_belong():
    assert apply_errors(container_job(command="docker run alpine")) == [
        "jobs[0].command: only with kind: shell (a container job runs its image: see container)"
    ]
    shell = {"name": "render", "schedule": "@daily", "command": "true"}
    shell["container"] = {"image": IMAGE}
    assert apply_errors(shell) == ["jobs[0].container: only with kind: container"]


def test_the_containers_env_may_name_stored_secrets_and_an_unknown_one_is_refused():
    env = {"DB_PASSWORD": "${secret:db-password}", "DSN": "pg://app:${secret:db-password}@db"}
    assert container_errors(image=IMAGE, env=env) == [
        'jobs[0].container.env.DB_PASSWORD: unknown secret "db-password"',
        'jobs[0].container.env.DSN: unknown secret "db-password"',
    ]
    store.put("db-password", "pw-5678", actor=None, now=NOW)
    # The job keeps the references; the values are read only at claim.
    assert applied(container={"image": IMAGE, "env": env}).container["env"] == env


def test_apply_switches_a_job_between_kinds():
    shell = {"name": "render", "schedule": "@daily", "command": "render"}
    apply({"jobs": [shell]}, now=NOW)
    assert applied().kind == "container"
    apply({"jobs": [shell]}, now=NOW)
    job = Job.objects.get(name="render")
    assert (job.kind, job.command, job.container) == ("shell", "render", {})


def test_the_plan_and_the_audit_trail_mask_a_secret_looking_value_of_the_containers_env():
    env = {"DB_PASSWORD": "plain-credential", "REGION": "eu"}
    [created] = apply({"jobs": [container_job(container={"image": IMAGE, "env": env})]}, now=NOW)
    assert created.diff["container"][1]["env"] == {"DB_PASSWORD": MASK, "REGION": "eu"}
    [event] = AuditEvent.objects.filter(action="job.created")
    assert "plain-credential" not in str(event.data)
    assert Job.objects.get(name="render").container["env"] == env


def test_apply_warns_when_only_agents_without_an_engine_carry_the_jobs_labels(tmp_path):
    Runner.objects.create(
        name="web-1", labels=["linux"], session="s", registered_at=NOW, last_seen_at=NOW,
        version="0.3.0", features=["http", "stdin"],
    )  # fmt: skip
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump({"jobs": [container_job(labels=["linux"])]}))
    err = StringIO()
    call_command("apply", str(path), stdout=StringIO(), stderr=err)
    assert err.getvalue().splitlines() == [
        "warning: job render: the job needs container, which the agents of the runners with "
        "labels linux do not have a container engine or predate: web-1 (0.3.0); run docker or "
        "podman where the agent runs and restart it (croniq-runner --engine), or upgrade "
        "croniq-runner; its runs wait until one registers"
    ]
    Runner.objects.filter(name="web-1").update(features=["container", "http", "stdin"])
    err = StringIO()
    call_command("apply", str(path), stdout=StringIO(), stderr=err)
    assert err.getvalue() == ""


# -- export ---------------------------------------------------------------------------


def test_the_export_writes_the_container_without_its_defaults():
    applied(container={"image": IMAGE, "args": ["render"], "pull": "always"})
    [item] = export().document["jobs"]
    assert item["kind"] == "container"
    assert "command" not in item and "http" not in item
    assert item["container"] == {"image": IMAGE, "args": ["render"], "pull": "always"}


def test_the_export_warns_of_a_secret_looking_env_value_but_not_of_a_reference():
    store.put("db-password", "pw-5678", actor=None, now=NOW)
    env = {"API_TOKEN": "t-1", "DB_PASSWORD": "${secret:db-password}"}
    applied(container={"image": IMAGE, "env": env})
    assert export().warnings == [
        "job render: container env API_TOKEN is written out as stored and looks like a "
        "secret: do not commit the file as it is (or write ${secret:NAME} instead)"
    ]


# -- the admin ------------------------------------------------------------------------


def test_the_admin_form_saves_a_container_job():
    typed = json.dumps({"image": IMAGE, "args": ["render"], "network": "host"})
    form = JobAdminForm(data=posted(job_form(kind="container", command="", container=typed)))
    assert form.is_valid(), form.errors
    job = form.save()
    assert (job.kind, job.container["image"], job.container["network"]) == (
        "container",
        IMAGE,
        "host",
    )


@pytest.mark.parametrize(
    ("typed", "error"),
    [
        ('{"image": "-it"}', "image: '-it' is not an image reference"),
        ('{"image": "alpine", "pull": "daily"}', "pull: 'daily' is not one of missing"),
        ("{not json", 'not JSON: {"image": "alpine:3.20", "args": [...], ...}'),
        ('{"args": ["x"]}', "image: required: the image to run"),
    ],
)
def test_the_admin_form_refuses_a_bad_container_on_its_field(typed, error):
    form = JobAdminForm(data=posted(job_form(kind="container", command="", container=typed)))
    assert not form.is_valid()
    assert list(form.errors) == ["container"]
    assert form.errors["container"][0].startswith(error), form.errors["container"]


def test_who_may_only_view_the_job_sees_a_secret_looking_env_value_masked(
    client, django_user_model
):
    env = {"DB_PASSWORD": "plain-credential", "REGION": "eu-central"}
    job = applied(container={"image": IMAGE, "env": env})
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(viewer)
    page = client.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert IMAGE in page and "eu-central" in page
    assert "plain-credential" not in page
    assert MASK in page
