"""Claiming container jobs (docs/design.md §4, §15): only runners whose
agent announced `container` (it found a container engine) get one, and the
work of runners without one waits saying why; the assignment carries
`kind` and `container` for container jobs alone; the `${secret:NAME}`
references of the container's env are resolved into it, their values to
redact."""

import datetime as dt

from django.utils import timezone

from dispatch import claims, coverage
from runners.models import Runner
from scheduler.models import Execution, Job
from tests.factories import JobFactory, RunnerFactory
from tests.runners.conftest import NOW, pending
from vault import store

BEFORE = NOW - dt.timedelta(seconds=1)
IMAGE = "registry.example.com/data/reports:1.4"
PASSWORD = "pw-resolved-4c1e"


def spec(**fields):
    return {"image": IMAGE, "args": [], "env": {}, "pull": "missing", "network": None, **fields}


def container_job(**fields):
    fields.setdefault("container", spec())
    return JobFactory(kind=Job.CONTAINER, command="", labels=["linux"], **fields)


def runner_with(token, name, features=("stdin", "http", "container")):
    return RunnerFactory(
        token=token, name=name, labels=["linux"], features=list(features), session=f"s-{name}"
    )


def handed(runner):
    executions = claims.claim(runner, runner.session, 5, NOW)
    return {a["id"]: a for a in claims.answer(runner, executions, NOW).assignments}


def test_an_agent_without_container_never_gets_a_container_job(token):
    engineless = runner_with(token, "engineless", ["stdin", "http"])
    plain = pending(now=BEFORE, labels=["linux"])
    pending(now=BEFORE, job=container_job())
    assert [e.pk for e in claims.claim(engineless, engineless.session, 5, NOW)] == [plain.pk]
    assert Execution.objects.filter(state=Execution.PENDING).count() == 1


def test_the_assignment_carries_kind_and_container_only_for_a_container_job(token):
    current = runner_with(token, "current")
    run = pending(now=BEFORE, job=container_job(container=spec(args=["render"])))
    plain = pending(now=BEFORE, labels=["linux"])
    found = handed(current)
    assert (found[run.pk]["kind"], found[run.pk]["container"]) == (
        "container",
        spec(args=["render"]),
    )
    assert "redact" not in found[run.pk] and "http" not in found[run.pk]
    assert not {"kind", "container"} & set(found[plain.pk])


def test_pending_container_work_says_the_runners_have_no_engine(token):
    runner_with(token, "web-1", ["stdin", "http"])
    Runner.objects.filter(name="web-1").update(version="0.3.0")
    waiting = coverage.Coverage.read().why_waiting(container_job().requirements, BEFORE, NOW)
    assert waiting.text == (
        "the job needs container, which the agents of the runners with labels linux do not "
        "have a container engine or predate: web-1 (0.3.0); run docker or podman where the "
        "agent runs and restart it (croniq-runner --engine), or upgrade croniq-runner"
    )


def test_the_containers_secrets_are_resolved_into_the_assignment_with_their_values_to_redact(
    token,
):
    store.put("db-password", PASSWORD, actor=None, now=NOW)
    current = runner_with(token, "current")
    env = {"DB_PASSWORD": "${secret:db-password}", "REGION": "eu"}
    run = pending(now=BEFORE, job=container_job(container=spec(env=env)))
    given = handed(current)[run.pk]
    assert given["container"] == spec(env={"DB_PASSWORD": PASSWORD, "REGION": "eu"})
    assert given["redact"] == [PASSWORD]
    # The row keeps the references.
    assert Job.objects.get(pk=run.job_id).container["env"] == env


def test_a_run_whose_container_names_a_deleted_secret_fails_unstarted_saying_where(token):
    current = runner_with(token, "current")
    run = pending(now=BEFORE, job=container_job(container=spec(env={"KEY": "${secret:gone}"})))
    assert handed(current) == {}
    run.refresh_from_db()
    assert run.state == Execution.FAILED
    assert run.error == 'not started: container.env.KEY: secret "gone" does not exist'


def test_over_http_the_poll_answers_kind_container_and_redact(api_client):
    features = ["stdin", "container"]
    store.put("db-password", PASSWORD, actor=None, now=timezone.now())
    body = {"name": "r1", "labels": ["linux"], "session": "s1", "features": features}
    runner_id = api_client.post("/v1/runners/register", body).json()["runner_id"]
    now = timezone.now()
    env = {"DB_PASSWORD": "${secret:db-password}"}
    run = pending(now=now, job=container_job(container=spec(env=env, network="none")))
    plain = pending(now=now, labels=["linux"])
    answer = api_client.post(f"/v1/runners/{runner_id}/poll", {"session": "s1", "capacity": 2})
    assert answer.status_code == 200, answer.content
    found = {a["id"]: a for a in answer.json()["executions"]}
    assert found[run.pk]["kind"] == "container"
    assert found[run.pk]["container"] == spec(env={"DB_PASSWORD": PASSWORD}, network="none")
    assert found[run.pk]["redact"] == [PASSWORD]
    # An assignment of any other job is as it always was.
    assert not {"kind", "container", "redact"} & set(found[plain.pk])
