"""Claiming http jobs (docs/design.md §4, §15): only runners whose agent
announced `http` get one, and an older agent's work waits saying why; the
assignment carries `kind` and `http` for http jobs alone; the request's
`${secret:NAME}` references are resolved into it, their values to redact."""

import asyncio
import datetime as dt

import pytest
from django.utils import timezone

from dispatch import claims, coverage
from dispatch.hub import Waiter
from runners.models import Runner
from scheduler.models import Execution, Job
from tests.factories import JobFactory, RunnerFactory
from tests.runners.conftest import NOW, pending
from vault import store

BEFORE = NOW - dt.timedelta(seconds=1)
URL = "https://hooks.example.com/refresh"
TOKEN = "t0k3n-resolved-value"
PATH = "path-part-9d41"


def request(**fields):
    return {
        "method": "POST",
        "url": URL,
        "headers": {},
        "body": "",
        "expect_status": [],
        "timeout": None,
        **fields,
    }


def http_job(**fields):
    fields.setdefault("http", request())
    return JobFactory(kind=Job.HTTP, command="", labels=["linux"], **fields)


def runner_with(token, name, features=("stdin", "run_as", "http")):
    return RunnerFactory(
        token=token, name=name, labels=["linux"], features=list(features), session=f"s-{name}"
    )


def handed(runner):
    executions = claims.claim(runner, runner.session, 5, NOW)
    return {a["id"]: a for a in claims.answer(runner, executions, NOW).assignments}


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_an_agent_that_did_not_announce_http_never_gets_an_http_job(token):
    older = runner_with(token, "older", ["stdin", "run_as"])
    plain = pending(now=BEFORE, labels=["linux"])
    pending(now=BEFORE, job=http_job())
    assert [e.pk for e in claims.claim(older, older.session, 5, NOW)] == [plain.pk]
    assert Execution.objects.filter(state=Execution.PENDING).count() == 1


def test_the_assignment_carries_kind_and_http_only_for_an_http_job(token):
    current = runner_with(token, "current")
    call = pending(now=BEFORE, job=http_job())
    plain = pending(now=BEFORE, labels=["linux"])
    found = handed(current)
    assert (found[call.pk]["kind"], found[call.pk]["http"]) == ("http", request())
    assert found[call.pk]["command"] == ""
    assert "redact" not in found[call.pk]
    assert not {"kind", "http"} & set(found[plain.pk])


def test_the_hub_deals_an_http_job_only_to_a_waiting_poll_that_announced_it(token, loop):
    older = runner_with(token, "a-older", ["stdin", "run_as"])
    current = runner_with(token, "b-current")
    call = pending(now=BEFORE, job=http_job())
    # The older runner waits longest: without the gate it would be dealt first.
    waiters = [Waiter(loop, r.pk, r.token, r.session, None) for r in (older, current)]
    served = claims.serve_waiters(waiters, NOW, NOW)
    got = {waiter.runner_id: [a["id"] for a in answer.assignments] for waiter, answer in served}
    assert got == {current.pk: [call.pk]}


def test_pending_http_work_says_the_agents_are_too_old(token):
    runner_with(token, "old-1", ["stdin", "run_as"])
    Runner.objects.filter(name="old-1").update(version="0.2.0")
    job = http_job()
    waiting = coverage.Coverage.read().why_waiting(job.requirements, BEFORE, NOW)
    assert waiting.text == (
        "the job needs http, which the agents of the runners with labels linux do not "
        "support: old-1 (0.2.0); upgrade croniq-runner"
    )


def test_the_requests_secrets_are_resolved_into_the_assignment_with_their_values_to_redact(token):
    store.put("api-token", TOKEN, actor=None, now=NOW)
    store.put("hook-path", PATH, actor=None, now=NOW)
    current = runner_with(token, "current")
    stored = request(
        url=URL + "/${secret:hook-path}",
        headers={"Authorization": "Bearer ${secret:api-token}", "X-Team": "data"},
        body="token=${secret:api-token}",
    )
    call = pending(now=BEFORE, job=http_job(http=stored))
    given = handed(current)[call.pk]
    assert given["http"] == request(
        url=f"{URL}/{PATH}",
        headers={"Authorization": f"Bearer {TOKEN}", "X-Team": "data"},
        body=f"token={TOKEN}",
    )
    assert given["redact"] == [TOKEN, PATH]
    # The row keeps the references.
    assert Job.objects.get(pk=call.job_id).http == stored


def test_env_and_request_secrets_are_redacted_together(token):
    store.put("api-token", TOKEN, actor=None, now=NOW)
    store.put("db-password", "hunter2-longer", actor=None, now=NOW)
    current = runner_with(token, "current")
    job = JobFactory(labels=["linux"], env={"DB_PASSWORD": "${secret:db-password}"})
    shell = pending(now=BEFORE, job=job)
    call = pending(now=BEFORE, job=http_job(http=request(body="${secret:api-token}")))
    found = handed(current)
    assert found[shell.pk]["redact"] == ["hunter2-longer"]
    assert found[call.pk]["redact"] == [TOKEN]
    assert found[call.pk]["http"]["body"] == TOKEN


def test_a_run_whose_request_names_a_deleted_secret_fails_unstarted_saying_where(token):
    current = runner_with(token, "current")
    headers = {"Authorization": "Bearer ${secret:gone}"}
    call = pending(now=BEFORE, job=http_job(http=request(headers=headers)))
    assert handed(current) == {}
    call.refresh_from_db()
    assert call.state == Execution.FAILED
    assert call.error == 'not started: http.headers.Authorization: secret "gone" does not exist'


def test_over_http_the_poll_answers_kind_http_and_redact(api_client):
    store.put("api-token", TOKEN, actor=None, now=timezone.now())
    body = {"name": "r1", "labels": ["linux"], "session": "s1", "features": ["stdin", "http"]}
    runner_id = api_client.post("/v1/runners/register", body).json()["runner_id"]
    now = timezone.now()
    headers = {"Authorization": "Bearer ${secret:api-token}"}
    call = pending(now=now, job=http_job(http=request(headers=headers)))
    plain = pending(now=now, labels=["linux"])
    answer = api_client.post(f"/v1/runners/{runner_id}/poll", {"session": "s1", "capacity": 2})
    assert answer.status_code == 200, answer.content
    found = {a["id"]: a for a in answer.json()["executions"]}
    assert found[call.pk]["kind"] == "http"
    assert found[call.pk]["http"]["headers"] == {"Authorization": f"Bearer {TOKEN}"}
    assert found[call.pk]["redact"] == [TOKEN]
    # An assignment of any other job is as it always was.
    assert not {"kind", "http", "redact"} & set(found[plain.pk])
