"""/api/docs shows an example for every request body, and each example is
one the API takes: sent to the real calls here, it is accepted."""

import pytest

from control import examples
from control.dead_letters_api import DiscardIn, ReplayIn
from control.jobs_api import PauseIn
from control.keys_api import KeyIn
from control.maintenance_api import MaintenanceIn
from control.triggers_api import BackfillIn, TriggerIn
from croniq_project.api import api as ninja_api
from dispatch.api import FinishIn, HandBackIn, HeartbeatIn, LogIn, PollIn, RegisterIn
from tests.control.keyed_client import KeyedClient

SCHEMAS = [
    RegisterIn,
    PollIn,
    HeartbeatIn,
    HandBackIn,
    LogIn,
    FinishIn,
    PauseIn,
    TriggerIn,
    BackfillIn,
    KeyIn,
    ReplayIn,
    DiscardIn,
    MaintenanceIn,
]


def request_bodies():
    schema = ninja_api.get_openapi_schema()
    components = schema["components"]["schemas"]
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            for content_type, content in (
                operation.get("requestBody", {}).get("content", {}).items()
            ):
                yield f"{method.upper()} {path} {content_type}", content, components


def has_example(content, components):
    if "example" in content or "examples" in content:
        return True
    body = content["schema"]
    refs = [body.get("$ref")] + [option.get("$ref") for option in body.get("anyOf", [])]
    named = [components[ref.rsplit("/", 1)[1]] for ref in refs if ref]
    return any("examples" in each for each in named)


def test_every_request_body_of_both_apis_has_an_example():
    bodies = list(request_bodies())
    assert len(bodies) >= 15
    missing = [name for name, content, components in bodies if not has_example(content, components)]
    assert missing == []


@pytest.mark.parametrize("model", SCHEMAS, ids=lambda model: model.__name__)
def test_each_schema_example_is_valid_for_its_schema(model):
    [example] = model.model_config["json_schema_extra"]["examples"]
    model.model_validate(example)


@pytest.fixture
def admin(db, client):
    return KeyedClient(client, ["admin"])


def test_the_job_examples_create_and_change_a_job(admin):
    created = admin.post("jobs", examples.JOB)
    assert created.status_code == 201, created.content
    changed = admin.patch(f"jobs/{examples.JOB['name']}", examples.JOB_PATCH)
    assert changed.status_code == 200, changed.content
    assert changed.json()["schedule"] == examples.JOB_PATCH["schedule"]


def test_the_calendar_example_writes_a_calendar(admin):
    answer = admin.put("calendars/de-by-workdays", examples.CALENDAR)
    assert answer.status_code in (200, 201), answer.content


def test_the_apply_examples_plan_a_calendar_and_a_job(admin):
    answer = admin.post("apply", examples.APPLY_DOCUMENT, dry_run="true")
    assert answer.status_code == 200, answer.content
    planned = {(change["kind"], change["name"]) for change in answer.json()["changes"]}
    assert planned == {("calendar", "de-by-workdays"), ("job", "morning-report")}
    yaml_answer = admin.client.post(
        "/api/v1/apply?dry_run=true",
        data=examples.APPLY_YAML.encode(),
        content_type="application/yaml",
        HTTP_AUTHORIZATION=f"Bearer {admin.secret}",
    )
    assert yaml_answer.status_code == 200, yaml_answer.content


def test_the_trigger_pause_and_backfill_examples_are_taken(admin):
    assert admin.post("jobs", examples.JOB).status_code == 201
    name = examples.JOB["name"]
    triggered = admin.post(f"jobs/{name}/trigger", examples.TRIGGER)
    assert triggered.status_code == 202, triggered.content
    backfilled = admin.post(f"jobs/{name}/backfill", examples.BACKFILL)
    assert backfilled.status_code == 202, backfilled.content
    paused = admin.post(f"jobs/{name}/pause", examples.PAUSE)
    assert paused.status_code == 200, paused.content


def test_the_key_example_mints_a_key(admin):
    [example] = KeyIn.model_config["json_schema_extra"]["examples"]
    answer = admin.post("keys", example)
    assert answer.status_code == 201, answer.content


def test_the_dead_letter_examples_are_taken(admin):
    replay = admin.post("dead-letters/1/replay", examples.REPLAY)
    assert (replay.status_code, replay.json()) == (404, {"detail": "no dead letter 1"})
    discard = admin.post("dead-letters/discard", examples.DISCARD)
    assert (discard.status_code, discard.json()) == (200, {"discarded": 0})
