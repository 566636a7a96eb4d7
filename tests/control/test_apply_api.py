"""`POST /api/v1/apply` (docs/design.md §8): the apply document as JSON, the
plan `manage.py apply` prints, all or nothing, needing jobs:write and
calendars:write."""

import json
from io import StringIO

import pytest
import yaml
from django.core.management import call_command

from audit.models import AuditEvent
from calendars.models import Calendar
from scheduler.models import Job
from tests.control.keyed_client import KeyedClient
from tests.factories import JobFactory, RunnerFactory

pytestmark = pytest.mark.django_db

BROKEN = {"name": "bad", "schedule": "61 * * * *", "command": "x"}
DOCUMENT = {
    "calendars": [{"name": "workdays", "weekdays": ["mon", "tue", "wed", "thu", "fri"]}],
    "jobs": [
        {"name": "report", "schedule": "30 2 * * *", "command": "true", "calendar": "workdays"},
        {"name": "heartbeat", "schedule": "@every 5m", "command": "true"},
    ],
}


@pytest.fixture
def api(client):
    return KeyedClient(client, ["jobs:write", "calendars:write"])


def snapshot():
    return list(Job.objects.order_by("name").values()), list(Calendar.objects.values())


def test_a_document_is_applied_audited_and_marked_as_apply_managed(api):
    answer = api.post("apply", DOCUMENT)

    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["applied"] is True
    assert [(c["action"], c["kind"], c["name"]) for c in body["changes"]] == [
        ("create", "calendar", "workdays"),
        ("create", "job", "report"),
        ("create", "job", "heartbeat"),
    ]
    assert set(Job.objects.values_list("managed_by", flat=True)) == {"apply"}
    assert Calendar.objects.get().managed_by == "apply"
    event = AuditEvent.objects.get(action="job.created", data__name="report")
    assert (event.actor_kind, event.actor_name) == (AuditEvent.API_KEY, "deploy")
    assert api.post("apply", DOCUMENT).json() == {"changes": [], "applied": True, "warnings": []}


def test_a_dry_run_answers_the_plan_and_writes_nothing(api):
    answer = api.post("apply", DOCUMENT, dry_run="true")

    assert answer.json()["applied"] is False
    assert len(answer.json()["changes"]) == 3
    assert snapshot() == ([], [])
    assert not AuditEvent.objects.exists()


def test_the_plan_is_the_one_manage_py_apply_prints(api, tmp_path):
    api.post("apply", DOCUMENT, source="croniq")
    changed = {**DOCUMENT, "jobs": [{**DOCUMENT["jobs"][0], "command": "false"}]}
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump(changed))
    out = StringIO()
    call_command("apply", str(path), "--dry-run", "--prune", "--json", stdout=out)

    answer = api.post("apply", changed, dry_run="true", prune="true", source="croniq")

    assert answer.json()["changes"] == json.loads(out.getvalue())
    assert [(c["action"], c["name"]) for c in answer.json()["changes"]] == [
        ("update", "report"),
        ("delete", "heartbeat"),
    ]


def test_prune_deletes_only_what_apply_manages(api):
    api.post("apply", DOCUMENT)
    JobFactory(name="made-in-admin")

    answer = api.post("apply", {"jobs": [DOCUMENT["jobs"][1]]}, prune="true")

    assert {(c["action"], c["name"]) for c in answer.json()["changes"]} == {
        ("delete", "report"),
        ("delete", "workdays"),
    }
    assert sorted(Job.objects.values_list("name", flat=True)) == ["heartbeat", "made-in-admin"]


@pytest.mark.parametrize(
    ("document", "detail"),
    [
        (
            {
                "jobs": [
                    DOCUMENT["jobs"][1],
                    {"name": "bad", "schedule": "61 * * * *", "command": "x"},
                ]
            },
            "jobs[1].schedule: ",
        ),
        (
            {"jobs": [{"name": "x", "command": "x", "schedule": "@daily", "colour": 1}]},
            "jobs[0]: unknown field(s): colour",
        ),  # fmt: skip
        ({"calendars": [{"name": "c", "weekdays": ["someday"]}]}, "calendars[0].weekdays: "),
        ({"jobs": {"name": "x"}}, "jobs: expected a list"),
        ({"servers": []}, "unknown top-level key(s): servers"),
        (["jobs"], "expected a mapping"),
    ],
)
def test_an_invalid_document_is_422_naming_item_and_field_and_writes_nothing(api, document, detail):
    api.post("apply", DOCUMENT)
    before = snapshot()
    events = AuditEvent.objects.count()

    answer = api.post("apply", document, prune="true")

    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"].startswith(detail)
    assert snapshot() == before
    assert AuditEvent.objects.count() == events


@pytest.mark.parametrize(
    ("key_scopes", "status", "detail"),
    [
        (["jobs:write"], 403, "needs scope calendars:write"),
        (["calendars:write"], 403, "needs scope jobs:write"),
        (["jobs:read", "calendars:read"], 403, "needs scope jobs:write"),
        (["admin"], 200, None),
    ],
)
def test_apply_needs_both_write_scopes(client, key_scopes, status, detail):
    answer = KeyedClient(client, key_scopes).post("apply", DOCUMENT)

    assert answer.status_code == status
    if detail:
        assert answer.json() == {"detail": detail}
        assert snapshot() == ([], [])


YAML_FILE = """\
# The file an operator keeps, comments and all.
calendars:
  - name: workdays
    weekdays: [mon, tue, wed, thu, fri]
    exclude:
      - {start: 2026-12-24, end: 2027-01-06, label: Christmas freeze}
jobs:
  - name: report
    schedule: "30 2 * * *"
    command: "true"
    calendar: workdays
"""


def post_yaml(api, text, **query):
    suffix = "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else ""
    return api.client.post(
        f"/api/v1/apply{suffix}",
        data=text.encode(),
        content_type="application/yaml",
        HTTP_AUTHORIZATION=f"Bearer {api.secret}",
    )


def test_a_yaml_body_is_read_as_manage_py_apply_reads_the_file(api, tmp_path):
    path = tmp_path / "croniq.yaml"
    path.write_text(YAML_FILE)
    out = StringIO()
    call_command("apply", str(path), "--dry-run", "--json", "--source", "api", stdout=out)

    planned = post_yaml(api, YAML_FILE, dry_run="true")
    applied = post_yaml(api, YAML_FILE)

    assert planned.status_code == 200, planned.content
    assert planned.json()["changes"] == json.loads(out.getvalue())
    assert applied.json()["applied"] is True
    period = Calendar.objects.get(name="workdays").periods.get()
    assert period.label == "Christmas freeze"
    assert Job.objects.get().calendar.name == "workdays"
    assert post_yaml(api, YAML_FILE).json() == {"changes": [], "applied": True, "warnings": []}


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("jobs: [name: x\n", "not valid YAML: "),
        ("- jobs\n", "expected a mapping"),
        ("jobs:\n  - {name: bad, schedule: '61 * * * *', command: x}\n", "jobs[0].schedule: "),
        ("[" * 100_000, "not valid YAML: "),
    ],
)
def test_a_bad_yaml_body_is_422_and_writes_nothing(api, text, detail):
    answer = post_yaml(api, text, prune="true")

    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"].startswith(detail)
    assert snapshot() == ([], [])


@pytest.mark.parametrize(
    ("content_type", "body", "detail"),
    [
        ("application/json", b"", "body: expected an apply document"),
        ("application/json", b"{", "not valid JSON: "),
        ("application/yaml", "jobs: []\n".encode("utf-16"), "body: not UTF-8 text"),
    ],
)
def test_a_body_that_is_no_document_is_422(api, content_type, body, detail):
    answer = api.client.post(
        "/api/v1/apply",
        data=body,
        content_type=content_type,
        HTTP_AUTHORIZATION=f"Bearer {api.secret}",
    )

    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"].startswith(detail)


def test_a_source_names_the_file_and_prune_deletes_only_its_rows(api):
    api.post("apply", {"jobs": [DOCUMENT["jobs"][1]]})
    api.post("apply", {**DOCUMENT, "jobs": DOCUMENT["jobs"][:1]}, source="billing")

    answer = api.post("apply", {}, prune="true", source="billing")

    assert {(c["action"], c["name"]) for c in answer.json()["changes"]} == {
        ("delete", "report"),
        ("delete", "workdays"),
    }
    assert list(Job.objects.values_list("name", "managed_source")) == [("heartbeat", "api")]


@pytest.mark.parametrize("source", ["", "x" * 101])
def test_a_bad_source_is_422_and_writes_nothing(api, source):
    answer = api.post("apply", DOCUMENT, source=source)

    assert answer.status_code == 422, answer.content
    assert answer.json()["detail"].startswith("source: ")
    assert snapshot() == ([], [])


def test_a_schedule_change_plans_the_fire_times_before_and_after(api):
    api.post("apply", DOCUMENT)
    moved = {**DOCUMENT, "jobs": [{**DOCUMENT["jobs"][1], "schedule": "@every 1h"}]}

    answer = api.post("apply", moved, dry_run="true")

    [change] = answer.json()["changes"]
    assert change["diff"] == {"schedule": ["@every 5m", "@every 1h"]}
    assert set(change["fires"]) == {"before", "after"}
    assert len(change["fires"]["before"]) == len(change["fires"]["after"]) == 5


def test_jobs_whose_labels_no_runner_carries_are_applied_with_a_warning(api):
    RunnerFactory(name="build-1", labels=["linux"])
    document = {
        "jobs": [
            {"name": "train", "schedule": "@daily", "command": "true", "labels": ["gpu"]},
            {"name": "build", "schedule": "@daily", "command": "true", "labels": ["linux"]},
        ]
    }

    body = api.post("apply", document).json()

    assert body["applied"] is True
    assert len(body["warnings"]) == 1
    assert body["warnings"][0].startswith("job train: ")
    assert set(Job.objects.values_list("name", flat=True)) == {"train", "build"}
