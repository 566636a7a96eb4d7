"""Fuzzing the management API from its own OpenAPI schema (schemathesis),
in-process, with an admin key and with a read-only key (every *:read
scope): no call answers 5xx, a refused call changes nothing, and the
read-only key changes nothing at all.

Each generated call runs in a savepoint rolled back afterwards, so every
call meets the same small world (a runner busy with an execution, a job, a
spare key, some audit events) and real ids are worth aiming at.
"""

import json
import os
from collections import Counter
from urllib.parse import urlencode, urlsplit

import pytest
import schemathesis
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

import audit
from control import scopes
from croniq_project.api import api
from scheduler.models import Execution
from tests.control.calls import LAST_USED, changed, fingerprint, key
from tests.control.management_api import management_operations
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

pytestmark = pytest.mark.django_db

# Per operation and key: the whole file stays well under a minute. Half in
# the PostgreSQL pass (see tests/e2e/test_api_fuzz.py).
SHARE = 2 if os.environ.get("CRONIQ_TEST_DATABASE_URL", "").startswith("postgres") else 1
EXAMPLES = 8 // SHARE
READ_SCOPES = [scope for scope in scopes.ALL if scope.endswith(":read")]


@pytest.fixture
def world():
    job = JobFactory(name="nightly")
    runner = RunnerFactory(name="web-1")
    ExecutionFactory(job=job, runner=runner, state=Execution.RUNNING, lease=1, session="s")
    audit.record("job.paused", target=job, actor=("user", "ann"))
    spare, _ = key("spare", ["jobs:read"])
    return {"runner_id": runner.pk, "name": spare.name}


@pytest.fixture(scope="module")
def operations():
    schema = schemathesis.openapi.from_dict(api.get_openapi_schema(path_prefix="/api/"))
    ours = {str(op) for op in management_operations()}
    found = [r.ok() for r in schema.get_all_operations()]
    found = [op for op in found if op.label in ours]
    assert len(found) == len(ours) >= 8, [op.label for op in found]
    return found


def cases(operation, real):
    generated = st.one_of(
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
        operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
    )

    @st.composite
    def aimed(draw):
        case = draw(generated)
        for name, value in real.items():
            if name in (case.path_parameters or {}) and draw(st.booleans()):
                case.path_parameters[name] = value
        return case

    return aimed()


def send(client, case, authorization):
    """The case through Django's test client, so it sees the test's database."""
    request = case.as_transport_kwargs(base_url="http://testserver")
    url = urlsplit(request["url"]).path
    if request["params"]:
        url += "?" + urlencode(request["params"], doseq=True)
    headers = {**request["headers"], "Authorization": authorization}
    content_type = headers.pop("Content-Type", "application/json")
    body = json.dumps(request["json"]) if "json" in request else request.get("data") or b""
    return client.generic(request["method"], url, body, content_type=content_type, headers=headers)


def show(case, answer):
    asked = f"{case.method} {case.formatted_path} {case.query} {case.body!r:.300}"
    return f"{asked} -> {answer.status_code} {answer.content[:300]!r}"


def fuzzed():
    return settings(
        max_examples=EXAMPLES,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


def fuzz(client, operations, world, authorization, check):
    seen = Counter()
    for operation in operations:

        @fuzzed()
        @given(case=cases(operation, world))
        def one(case):
            before = fingerprint(ignore=[LAST_USED])
            with transaction.atomic():
                answer = send(client, case, authorization)
                after = fingerprint(ignore=[LAST_USED])
                transaction.set_rollback(True)
            seen[answer.status_code] += 1
            assert answer.status_code < 500, show(case, answer)
            check(case, answer, changed(before, after))

        one()
    return seen


def test_with_an_admin_key_no_call_fails_and_a_refused_one_changes_nothing(
    client, operations, world
):
    _, authorization = key("fuzz-admin", ["admin"])

    def check(case, answer, changes):
        if answer.status_code >= 400:
            assert not changes, f"{show(case, answer)}\n{changes}"

    seen = fuzz(client, operations, world, authorization, check)
    # Past validation into the logic: accepted, created, unknown, bad input.
    assert seen[200] and seen[422] and seen[404], seen


def test_with_a_read_only_key_no_call_fails_or_changes_anything(client, operations, world):
    _, authorization = key("fuzz-reader", READ_SCOPES)

    def check(case, answer, changes):
        if minted(case, answer):
            # Any key may mint a key within its own reach (a read-only one here).
            assert set(changes) == {"control.ApiKey", "audit.AuditEvent"}, changes
            return
        assert not changes, f"{show(case, answer)}\n{changes}"

    seen = fuzz(client, operations, world, authorization, check)
    assert seen[200] and seen[403], seen


def minted(case, answer):
    return (case.method, case.path, answer.status_code) == ("POST", "/api/v1/keys", 201)
