"""Every management-API call, found in the NinjaAPI itself, against every
scope, a revoked key, an expired key, a runner token and no credential:
allowed, or refused with 401/403 and nothing in the database changed."""

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from django.db import transaction

from control import scopes
from control.models import ApiKey
from runners.models import Runner, RunnerToken
from scheduler.models import Execution, Job
from tests.control.calls import call, changed, fingerprint, key
from tests.control.management_api import all_operations, management_operations
from tests.factories import CalendarFactory, ExecutionFactory, JobFactory, RunnerFactory

pytestmark = pytest.mark.django_db

PAST = datetime(2026, 1, 1, tzinfo=UTC)
OPERATIONS = management_operations()
CREDENTIALS = [*scopes.ALL, "revoked key", "expired key", "runner token", "no header"]


@dataclass
class World:
    job: Job
    execution: Execution
    runner: Runner
    spare: ApiKey
    authorization: dict


@pytest.fixture
def world():
    job = JobFactory(name="nightly")
    calendar = CalendarFactory(name="ops")
    job.calendar = calendar
    job.save()
    runner = RunnerFactory(name="web-1")
    authorization = {scope: key(f"key-{scope}", [scope])[1] for scope in scopes.ALL}
    revoked, authorization["revoked key"] = key("revoked", ["admin"])
    ApiKey.objects.filter(pk=revoked.pk).update(revoked_at=PAST)
    authorization["expired key"] = key("expired", ["admin"], expires_at=PAST)[1]
    authorization["runner token"] = f"Bearer {RunnerToken.issue('rack-1')[1]}"
    authorization["no header"] = None
    return World(
        job=job,
        execution=ExecutionFactory(job=job, runner=runner, state=Execution.FAILED),
        runner=runner,
        spare=key("spare", ["jobs:read"])[0],
        authorization=authorization,
    )


def path_values(operation, world):
    """A real object for each path parameter: by its name, else by the
    resource the path is under (jobs and calendars by name, others by id)."""
    by_name = {
        "runner_id": world.runner.pk,
        "execution_id": world.execution.pk,
        "job_name": world.job.name,
        "calendar_name": world.job.calendar.name,
        "key_name": world.spare.name,
    }
    by_resource = {
        "jobs": world.job.name,
        "calendars": world.job.calendar.name,
        "keys": world.spare.name,
        "runners": world.runner.pk,
        "executions": world.execution.pk,
        "dead-letters": world.execution.pk,
    }
    return {
        name: by_name.get(name, by_resource.get(operation.resource, "1"))
        for name in operation.parameters
    }


def body_for(operation, credential):
    """A valid body where cheap (an allowed call should get into its logic);
    others' calls get {} and may answer 422: only 401/403 matter here."""
    if (operation.method, operation.resource) == ("POST", "keys"):
        granted = credential if credential in scopes.ALL else "jobs:read"
        return {"name": "minted", "scopes": [granted]}
    return {} if operation.method in ("POST", "PUT", "PATCH") else None


def needed(operation):
    """The scopes a call needs: none (any key), one, or several."""
    if operation.scope is None:
        return []
    return [operation.scope] if isinstance(operation.scope, str) else list(operation.scope)


def expected(operation, credential):
    """401, 403 or "allowed"."""
    if credential not in scopes.ALL:
        return 401
    if all(scopes.covers([credential], scope) for scope in needed(operation)):
        return "allowed"
    return 403


@pytest.mark.parametrize("operation", OPERATIONS, ids=str)
def test_each_call_is_allowed_or_refused_by_scope_with_nothing_changed(client, world, operation):
    url = operation.url(path_values(operation, world))
    wrong = []
    before = fingerprint()  # every call is rolled back: each starts from here
    for credential in CREDENTIALS:
        with transaction.atomic():
            answer = call(
                client,
                operation.method.lower(),
                url,
                world.authorization[credential],
                body_for(operation, credential),
            )
            after = fingerprint()
            transaction.set_rollback(True)  # each credential meets the same world
        want = expected(operation, credential)
        got = answer.status_code
        if want == "allowed":
            if got in (401, 403):
                wrong.append(f"{credential}: {got} {answer.content[:200]}")
            continue
        if got != want:
            wrong.append(f"{credential}: {got}, expected {want}: {answer.content[:200]}")
        elif want == 403 and not refused_for_scope(operation, answer.json()):
            wrong.append(f"{credential}: body {answer.json()}")
        if changed(before, after):
            wrong.append(f"{credential}: refused but changed {list(changed(before, after))}")
    assert not wrong, f"{operation}:\n" + "\n".join(wrong)


def refused_for_scope(operation, body):
    scopes_needed = needed(operation)
    if len(scopes_needed) == 1:
        return body == {"detail": f"needs scope {scopes_needed[0]}"}
    return set(body) == {"detail"} and body["detail"].startswith("needs scope ")


def test_the_matrix_walks_at_least_the_calls_built_so_far():
    walked = {(op.method, op.path): op.scope for op in OPERATIONS}
    assert (
        walked.items()
        >= {
            ("POST", "/api/v1/keys"): None,
            ("GET", "/api/v1/keys"): "admin",
            ("DELETE", "/api/v1/keys/{name}"): "admin",
            ("GET", "/api/v1/runners"): "runners:read",
            ("POST", "/api/v1/runners/{runner_id}/drain"): "runners:write",
            ("POST", "/api/v1/runners/{runner_id}/resume"): "runners:write",
            ("POST", "/api/v1/runners/{runner_id}/forget"): "runners:write",
            ("GET", "/api/v1/audit"): "audit:read",
            ("GET", "/api/v1/dead-letters"): "dead-letters:read",
            ("GET", "/api/v1/dead-letters/{dead_letter_id}"): "dead-letters:read",
            ("POST", "/api/v1/dead-letters/{dead_letter_id}/replay"): "dead-letters:write",
            ("DELETE", "/api/v1/dead-letters/{dead_letter_id}"): "dead-letters:write",
            ("POST", "/api/v1/dead-letters/discard"): "dead-letters:write",
            ("GET", "/api/v1/maintenance"): "runners:read",
            ("PUT", "/api/v1/maintenance"): "admin",
            ("GET", "/api/v1/forecast"): ["jobs:read", "runners:read"],
        }.items()
    )


# Calls whose credential is their URL, a job's webhook: tests/control/test_webhooks.py.
KEYLESS = {("POST", "/api/v1/hooks/{token}")}


def test_every_v1_call_needs_a_runner_token_or_an_api_key():
    # A call under /v1/ with neither would escape this matrix unseen.
    for method, path, auths in all_operations():
        if path.startswith("/api/v1/") and (method, path) not in KEYLESS:
            kinds = {type(auth).__name__ for auth in auths}
            assert kinds and kinds <= {"RunnerAuth", "ApiKeyAuth"}, (method, path, kinds)
