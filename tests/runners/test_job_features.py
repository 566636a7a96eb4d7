"""Jobs needing a feature of their runner's agent (stdin, run_as;
docs/design.md §4): an agent announces what it supports at registration,
and a claim never hands such a job to a runner that did not announce it."""

import asyncio
import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from dispatch import claims, coverage, identity
from dispatch.hub import Waiter
from notifications import detectors
from notifications.models import Event
from runners.models import Runner
from scheduler.models import Execution
from tests.factories import JobFactory, RunnerFactory
from tests.runners.conftest import NOW, pending

BEFORE = NOW - dt.timedelta(seconds=1)


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def runner_with(token, name, features=(), labels=("linux",)):
    return RunnerFactory(
        token=token, name=name, labels=list(labels), features=list(features), session=f"s-{name}"
    )


def claim(runner, capacity=5):
    return [e.pk for e in claims.claim(runner, runner.session, capacity, NOW)]


def test_registration_stores_the_features_the_agent_announces(token):
    runner, _ = identity.register(
        token, "build-1", "s1", NOW, features=["stdin", "run_as", "stdin", "future"]
    )
    runner.refresh_from_db()
    assert runner.features == ["future", "run_as", "stdin"]
    # Unknown names are kept but never match anything.
    assert runner.fits == frozenset({"\x00feature:run_as", "\x00feature:stdin"})


def test_an_agent_that_announced_nothing_never_gets_a_stdin_or_run_as_job(token):
    old = runner_with(token, "old")
    plain = pending(now=BEFORE, labels=["linux"])
    pending(now=BEFORE, job=JobFactory(labels=["linux"], stdin="input\n"))
    pending(now=BEFORE, job=JobFactory(labels=["linux"], run_as="nobody"))
    assert claim(old) == [plain.pk]
    assert Execution.objects.filter(state=Execution.PENDING).count() == 2


def test_a_runner_gets_the_jobs_needing_exactly_the_features_it_announced(token):
    stdin_only = runner_with(token, "stdin-only", ["stdin"])
    fed = pending(now=BEFORE, job=JobFactory(stdin="input\n"))
    both = pending(now=BEFORE, job=JobFactory(stdin="x", run_as="nobody"))
    assert claim(stdin_only) == [fed.pk]
    current = runner_with(token, "current", ["stdin", "run_as"])
    assert claim(current) == [both.pk]


def test_the_assignment_carries_stdin_and_run_as_only_when_the_job_sets_them(token):
    current = runner_with(token, "current", ["stdin", "run_as"])
    fed = pending(now=BEFORE, job=JobFactory(stdin="a%b\n", run_as="nobody"))
    plain = pending(now=BEFORE)
    claimed = claims.claim(current, current.session, 5, NOW)
    found = {a["id"]: a for a in claims.answer(current, claimed, NOW).assignments}
    assert (found[fed.pk]["stdin"], found[fed.pk]["run_as"]) == ("a%b\n", "nobody")
    assert "stdin" not in found[plain.pk] and "run_as" not in found[plain.pk]


def test_the_hub_deals_feature_jobs_only_to_the_waiting_polls_that_announced_them(token, loop):
    old = runner_with(token, "a-old")
    current = runner_with(token, "b-current", ["stdin", "run_as"])
    fed = pending(now=BEFORE, job=JobFactory(labels=["linux"], stdin="input\n"))
    # The old runner waits longest: without the gate it would be dealt first.
    waiters = [
        Waiter(loop, runner.pk, runner.token, runner.session, None) for runner in (old, current)
    ]
    served = claims.serve_waiters(waiters, NOW, NOW)
    got = {waiter.runner_id: [a["id"] for a in handed.assignments] for waiter, handed in served}
    assert got == {current.pk: [fed.pk]}


def test_pending_work_for_a_missing_feature_says_the_agents_are_too_old(token):
    runner_with(token, "old-1")
    Runner.objects.filter(name="old-1").update(version="0.2.0")
    job = JobFactory(labels=["linux"], stdin="input\n")
    waiting = coverage.Coverage.read().why_waiting(job.requirements, BEFORE, NOW)
    assert waiting.kind == "unknown"
    assert waiting.text == (
        "the job needs stdin, which the agents of the runners with labels linux do not "
        "support: old-1 (0.2.0); upgrade croniq-runner"
    )


def test_pending_run_as_work_names_the_allow_list_as_well_as_an_older_agent(token):
    # A current agent without --allow-run-as announces stdin only.
    runner_with(token, "web-1", ["stdin"])
    Runner.objects.filter(name="web-1").update(version="0.3.0")
    job = JobFactory(labels=["linux"], stdin="input\n", run_as="root")
    waiting = coverage.Coverage.read().why_waiting(job.requirements, BEFORE, NOW)
    assert waiting.kind == "unknown"
    assert waiting.text == (
        "the job needs run_as, which the agents of the runners with labels linux do not "
        "allow (croniq-runner --allow-run-as) or predate: web-1 (0.3.0); name the job's "
        "user in their --allow-run-as, or upgrade croniq-runner"
    )
    # With an older agent beside it, stdin is missing too: upgrading is needed.
    runner_with(token, "old-1")
    waiting = coverage.Coverage.read().why_waiting(job.requirements, BEFORE, NOW)
    assert waiting.text == (
        "the job needs run_as, stdin, which the agents of the runners with labels linux do "
        "not support: old-1 (version unknown), web-1 (0.3.0); upgrade croniq-runner and "
        "name the job's user in their --allow-run-as"
    )


def test_a_run_on_all_job_needing_a_feature_runs_only_on_runners_that_announced_it(token):
    runner_with(token, "old")
    runner_with(token, "current", ["stdin", "run_as"])
    job = JobFactory(labels=["linux"], stdin="x")
    assert coverage.online_with(job.requirements) == ["current"]
    assert coverage.online_with(JobFactory(labels=["linux"]).requirements) == ["current", "old"]


def test_a_missed_run_says_when_only_older_agents_carry_its_labels(settings, token):
    settings.CRONIQ_MISSED_GRACE = 60.0
    detectors.forget()
    runner_with(token, "old")
    job = JobFactory(name="fed", labels=["linux"], stdin="input\n")
    pending(now=NOW, job=job)
    assert detectors.detect_missed(NOW + dt.timedelta(seconds=61)) == 1
    [event] = Event.objects.filter(name="job.missed")
    assert event.data["reason"] == (
        "the online runners carrying its labels run agents that do not support stdin: "
        "upgrade croniq-runner"
    )
    detectors.forget()


def test_a_missed_run_as_run_names_the_allow_list_when_the_agents_announced_stdin(settings, token):
    settings.CRONIQ_MISSED_GRACE = 60.0
    detectors.forget()
    runner_with(token, "current", ["stdin"])
    job = JobFactory(name="as-root", labels=["linux"], run_as="root")
    pending(now=NOW, job=job)
    assert detectors.detect_missed(NOW + dt.timedelta(seconds=61)) == 1
    [event] = Event.objects.filter(name="job.missed")
    assert event.data["reason"] == (
        "the online runners carrying its labels run agents that do not allow "
        "(croniq-runner --allow-run-as) or predate run_as: name the job's user in their "
        "--allow-run-as, or upgrade croniq-runner"
    )
    detectors.forget()


def test_the_runner_page_shows_what_its_agent_announced(admin_client, token):
    runner = runner_with(token, "current", ["run_as", "stdin"])
    page = admin_client.get(reverse("admin:runners_runner_change", args=[runner.pk]))
    assert page.status_code == 200
    assert "Features" in page.content.decode()
    assert "[&quot;run_as&quot;, &quot;stdin&quot;]" in page.content.decode()


def test_over_http_an_announcing_agent_gets_stdin_and_run_as_and_others_none(api_client):
    body = {"name": "r1", "labels": ["linux"], "session": "s1", "features": ["stdin", "run_as"]}
    runner_id = api_client.post("/v1/runners/register", body).json()["runner_id"]
    assert Runner.objects.get(pk=runner_id).features == ["run_as", "stdin"]
    now = timezone.now()
    fed = pending(now=now, job=JobFactory(labels=["linux"], stdin="in\n", run_as="nobody"))
    plain = pending(now=now, labels=["linux"])
    answer = api_client.post(f"/v1/runners/{runner_id}/poll", {"session": "s1", "capacity": 2})
    assert answer.status_code == 200, answer.content
    found = {a["id"]: a for a in answer.json()["executions"]}
    assert (found[fed.pk]["stdin"], found[fed.pk]["run_as"]) == ("in\n", "nobody")
    # An assignment of any other job is as it always was.
    assert not {"stdin", "run_as"} & set(found[plain.pk])


@pytest.mark.parametrize("features", [[7], ["x" * 51], [""], ["f"] * 51, "stdin"])
def test_malformed_features_are_refused_422(api_client, features):
    body = {"name": "r1", "labels": ["linux"], "session": "s1", "features": features}
    assert api_client.post("/v1/runners/register", body).status_code == 422
