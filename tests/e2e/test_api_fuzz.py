"""Fuzzing the runner API from its OpenAPI schema, checking state, not just status.

test_protocol_schema.py runs the schemathesis CLI with a valid token and
checks for server errors. These tests drive schemathesis' case generation
(valid and invalid bodies, real and made-up ids) against the real ASGI
server and read the database around every call:

- with a bad token (missing, unknown, revoked, wrong scheme, a real token
  with one character changed) every call is refused with 401 (or 422 for a
  malformed body, 400 for a refused Host header) and changes nothing at
  all, not even the audit;
- with a valid token no call gets a 5xx, and a refused call (4xx) changes
  nothing but the audit trail of the refusal itself (fencing rejections and
  refused name bindings are meant to be recorded, docs/design.md §4).
"""

import contextlib
import json
import os
from collections import Counter

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from harness.processes import Server, drop_database, manage, migrated_database
from tests.chaos.harness import wait_healthy
from tests.e2e.protocol_client import RunnerClient, seed, token

pytestmark = pytest.mark.e2e

# Per operation. The PostgreSQL pass takes half: the checks that refuse bad
# input are the same code on both backends, and it still tries every
# operation with values PostgreSQL stores differently (NUL, offsets, sizes);
# the SQLite pass runs all of them. CI's two passes then end together.
SHARE = 2 if os.environ.get("CRONIQ_TEST_DATABASE_URL", "").startswith("postgres") else 1
EXAMPLES_VALID_TOKEN = 30 // SHARE
EXAMPLES_BAD_TOKEN = 16 // SHARE
# Refusals that are audited on purpose (and counted on /metrics).
AUDITED_REFUSALS = ("execution.fencing_rejected", "runner.binding_refused")
REFUSAL_COUNTERS = ("croniq_fencing_rejections_total", "croniq_runner_binding_refusals_total")
# Dispatch latency samples are written in batches up to half a second after
# the answer that carried the work (dispatch.hub.observe_latencies): an
# accepted poll's sample can land while the next call runs. A refused call
# hands out no work, so it records none of its own.
LATE_COUNTERS = "croniq_dispatch_latency_seconds"
KEYLESS_PREFIX = "/api/v1/hooks/"


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    """One migrated database for both tests (each compares against its own start)."""
    url = migrated_database(tmp_path_factory.mktemp("fuzz"))
    yield url
    drop_database(url)


@pytest.fixture(scope="module")
def server(database, tmp_path_factory):
    """The real ASGI server; a slow first /healthz on a busy machine is waited out."""
    process = Server(database, tmp_path_factory.mktemp("fuzz-web") / "web.log")
    try:
        yield wait_healthy(process)
    finally:
        process.stop()


@pytest.fixture(scope="module")
def world(server, database):
    """A token, a registered runner holding a claimed execution, and a revoked token."""
    secret = token(database)
    runner = RunnerClient(server.url, secret, name="fuzz-target")
    runner.register()
    seed(database, {"job": "fuzzed", "labels": []}, {"job": "waiting", "labels": []})
    [held] = runner.claim()
    revoked = token(database, "revoked")
    manage(database, "shell", "-c", REVOKE)
    schema = schemathesis.openapi.from_url(server.url + "/api/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    # A job's webhook needs no token: its URL is the credential
    # (tests/control/test_webhooks.py); an unknown URL is 404.
    operations = [op for op in operations if not op.path.startswith(KEYLESS_PREFIX)]
    assert len(operations) >= 5, [op.label for op in operations]
    return dict(
        db=database,
        url=server.url,
        server=server,
        secret=secret,
        revoked=revoked,
        runner=runner,
        held=held,
        operations=operations,
    )


STATE_QUERIES = dict(
    executions="SELECT * FROM scheduler_execution ORDER BY id",
    runners="SELECT * FROM runners_runner ORDER BY id",
    logs="SELECT execution_id, seq, data FROM scheduler_logchunk ORDER BY id",
    # last_used_at says a token was presented, refused call or not: not state.
    tokens="SELECT id, name, secret_hash, revoked_at FROM runners_runnertoken ORDER BY id",
    audit="SELECT id, action, target_id, data FROM audit_auditevent ORDER BY id",
    counters="SELECT name, labels, value FROM audit_counter ORDER BY name, labels",
)


def read_all(db):
    """Every STATE_QUERIES result, over one connection (one snapshot per query)."""
    if db.startswith("sqlite"):
        import sqlite3

        with contextlib.closing(sqlite3.connect(db.removeprefix("sqlite:///"), timeout=20)) as c:
            return {key: c.execute(sql).fetchall() for key, sql in STATE_QUERIES.items()}
    import psycopg

    with psycopg.connect(db.replace("postgres://", "postgresql://")) as conn:
        return {key: conn.execute(sql).fetchall() for key, sql in STATE_QUERIES.items()}


REVOKE = """
from django.utils import timezone
from runners.models import RunnerToken
RunnerToken.objects.filter(name="revoked").update(revoked_at=timezone.now())
"""


def state(db, ignore_refusal_audit):
    """Everything a runner call could change, as comparable values."""
    found = read_all(db)
    found["counters"] = [row for row in found["counters"] if not row[0].startswith(LATE_COUNTERS)]
    if ignore_refusal_audit:
        found["audit"] = [row for row in found["audit"] if row[1] not in AUDITED_REFUSALS]
        found["counters"] = [row for row in found["counters"] if row[0] not in REFUSAL_COUNTERS]
    return found


def changes(before, after):
    return {key: (before[key], after[key]) for key in before if before[key] != after[key]}


def cases(operation, world):
    """Valid and invalid requests for `operation`, often aimed at real ids."""
    generated = st.one_of(
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
        operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
    )
    real = {"runner_id": world["runner"].runner_id, "execution_id": world["held"]["id"]}

    @st.composite
    def aimed(draw):
        case = draw(generated)
        for name, value in real.items():
            if name in case.path_parameters and draw(st.booleans()):
                case.path_parameters[name] = value
        if isinstance(case.body, dict) and draw(st.booleans()):
            # The real session and lease get past the first checks into the logic.
            with contextlib.suppress(TypeError):
                case.body.setdefault("session", world["runner"].session)
                case.body.setdefault("lease", world["held"]["lease"])
        return case

    return aimed()


# uvicorn's own answer to bytes HTTP does not allow (a value the fuzzer
# made up where a request line or header must be plain): the request never
# reached Croniq, so it says nothing of Croniq's answers.
NOT_HTTP = "Invalid HTTP request received."


def call(case, world, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    try:
        response = case.call(base_url=world["url"], headers=headers, timeout=70)
    except requests.ConnectionError as error:
        pytest.fail(f"the server dropped the connection: {error}\n{world['server'].output()}")
    if response.status_code == 400 and response.text == NOT_HTTP:
        reject()
    return response


def show(case, response):
    body = case.body if not isinstance(case.body, bytes) else case.body[:200]
    return (
        f"{case.method} {case.formatted_path} body={json.dumps(body, default=str)[:500]} -> "
        f"{response.status_code} {response.text[:300]}"
    )


def bad_authorizations(world):
    secret = world["secret"]
    return st.sampled_from(
        [
            None,
            "Bearer",
            "Bearer ",
            "Bearer crq_no-such-token",
            f"Bearer {world['revoked']}",
            f"Bearer {secret[:-1]}{'a' if secret[-1] != 'a' else 'b'}",
            f"Basic {secret}",
            f"{secret}",
            f"Bearer {secret} trailing",
        ]
    )


def fuzzed(examples):
    return settings(
        max_examples=examples,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


def test_with_a_bad_token_every_call_is_refused_and_changes_nothing(world):
    before = state(world["db"], ignore_refusal_audit=False)
    seen = Counter()
    for operation in world["operations"]:

        @fuzzed(EXAMPLES_BAD_TOKEN)
        @given(case=cases(operation, world), authorization=bad_authorizations(world))
        def refused(case, authorization):
            response = call(case, world, authorization)
            seen[response.status_code] += 1
            # 400: a Host header Django refuses (the fuzzer sends some).
            assert response.status_code in (400, 401, 422), show(case, response)
            assert "detail" in response.json(), show(case, response)
            after = state(world["db"], ignore_refusal_audit=False)
            assert not changes(before, after), f"{show(case, response)}\n{changes(before, after)}"

        refused()
    assert seen[401] > 0, seen
    assert "Traceback" not in world["server"].output()


def test_with_a_valid_token_no_call_fails_and_a_refused_call_changes_nothing(world):
    authorization = f"Bearer {world['secret']}"
    seen = Counter()
    for operation in world["operations"]:

        @fuzzed(EXAMPLES_VALID_TOKEN)
        @given(case=cases(operation, world))
        def answered(case):
            before = state(world["db"], ignore_refusal_audit=True)
            response = call(case, world, authorization)
            seen[response.status_code] += 1
            assert response.status_code < 500, show(case, response)
            if response.status_code >= 400:
                assert "detail" in response.json(), show(case, response)
                after = state(world["db"], ignore_refusal_audit=True)
                assert not changes(before, after), (
                    f"{show(case, response)}\n{changes(before, after)}"
                )

        answered()
    # The fuzzer got past validation into the logic: accepted, unknown ids,
    # stale leases or sessions, malformed bodies.
    assert seen[200] and seen[422] and (seen[404] or seen[409]), seen
    assert "Traceback" not in world["server"].output()
