"""A job's limits on the server's side of the runner protocol (docs/design.md
§4, §15): which runners may claim a limited job, what its assignment
carries, the exit codes its finish settles as a success (one at a time and
in a batch), and the log the server keeps of an older agent's run."""

import datetime as dt

import pytest

from dispatch import claims, coverage, identity
from dispatch import leases as dispatch
from runners.models import Runner, RunnerToken
from scheduler.models import LOG_TRUNCATED_MARKER, Execution, LogChunk
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory
from tests.runners.conftest import NOW, pending

pytestmark = pytest.mark.django_db

BEFORE = NOW - dt.timedelta(seconds=1)
DONE = NOW + dt.timedelta(seconds=5)
MIB = 1024 * 1024
OLDER = ("stdin", "run_as", "http")  # an agent of 0.3.x
CURRENT = (*OLDER, "limits")


def runner_with(token, name, features=CURRENT):
    return RunnerFactory(
        token=token, name=name, labels=["linux"], features=list(features), session=f"s-{name}"
    )


def limited(**fields):
    return JobFactory(labels=["linux"], command="make", **fields)


def handed(runner):
    executions = claims.claim(runner, runner.session, 5, NOW)
    return {a["id"]: a for a in claims.answer(runner, executions, NOW).assignments}


# -- claims ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"max_memory": 64 * MIB},
        {"max_cpu_seconds": 2},
        {"max_output": 4096, "on_max_output": "fail"},
    ],
)
def test_an_agent_that_did_not_announce_limits_never_gets_a_job_it_would_run_unbounded(
    token, fields
):
    older = runner_with(token, "older", OLDER)
    plain = pending(now=BEFORE, labels=["linux"])
    kept_out = pending(now=BEFORE, job=limited(**fields))
    assert [e.pk for e in claims.claim(older, older.session, 5, NOW)] == [plain.pk]
    current = runner_with(token, "current")
    assert [e.pk for e in claims.claim(current, current.session, 5, NOW)] == [kept_out.pk]


def test_an_older_agent_still_gets_a_job_with_an_output_limit_or_exit_codes(token):
    older = runner_with(token, "older", OLDER)
    cut = pending(now=BEFORE, job=limited(max_output=4096))
    coded = pending(now=BEFORE, job=limited(success_exit_codes=[0, 3]))
    found = handed(older)
    assert set(found) == {cut.pk, coded.pk}
    assert found[cut.pk]["max_output"] == 4096
    assert "success_exit_codes" not in found[coded.pk]  # the server reads it at the end


def test_the_assignment_carries_the_limits_the_job_sets_and_always_its_output(token, settings):
    settings.CRONIQ_LOG_LIMIT = 2 * MIB
    current = runner_with(token, "current")
    strict = pending(
        now=BEFORE,
        job=limited(max_output=4096, on_max_output="fail", max_memory=64 * MIB, max_cpu_seconds=2),
    )
    plain = pending(now=BEFORE, labels=["linux"])
    found = handed(current)
    assert {k: found[strict.pk][k] for k in claims.limits(strict.job)} == {
        "max_output": 4096,
        "on_max_output": "fail",
        "max_memory": 64 * MIB,
        "max_cpu_seconds": 2,
    }
    assert found[plain.pk]["max_output"] == 2 * MIB  # the server's log limit
    assert not {"on_max_output", "max_memory", "max_cpu_seconds"} & set(found[plain.pk])


def test_pending_limited_work_says_the_agents_are_too_old(token):
    runner_with(token, "old-1", OLDER)
    Runner.objects.filter(name="old-1").update(version="0.3.0")
    job = limited(max_memory=64 * MIB)
    waiting = coverage.Coverage.read().why_waiting(job.requirements, BEFORE, NOW)
    assert waiting.text == (
        "the job needs limits, which the agents of the runners with labels linux do not "
        "support: old-1 (0.3.0); upgrade croniq-runner"
    )


# -- finish: the exit codes that succeed ----------------------------------------------


@pytest.fixture
def issued():
    return RunnerToken.issue("limits-token")


@pytest.fixture
def runner(issued):
    return RunnerFactory(token=issued[0], labels=[], session="s1", capacity=100)


def run(runner, job, minute=0):
    ExecutionFactory(job=job, scheduled_for=NOW + dt.timedelta(minutes=minute))
    (execution,) = claims.claim(runner, runner.session, 1, NOW + dt.timedelta(minutes=minute))
    return execution


def finish(secret, execution, exit_code):
    credential = identity.Credential(secret)
    return dispatch.finish(
        credential, execution.pk, "s1", execution.lease, exit_code, "", False, DONE
    )


def finish_many(secret, runner, executions_and_codes):
    reports = [(e.pk, e.lease, code, "", False) for e, code in executions_and_codes]
    answers = dispatch.finish_many(identity.Credential(secret), runner.pk, "s1", reports, DONE)
    return [answer["state"] for answer in answers]


@pytest.mark.parametrize(
    ("codes", "exit_code", "state"),
    [
        ([], 0, Execution.SUCCEEDED),
        ([], 3, Execution.FAILED),
        ([0, 3], 3, Execution.SUCCEEDED),
        ([0, 3], 0, Execution.SUCCEEDED),
        ([0, 3], 1, Execution.FAILED),
        ([3], 0, Execution.FAILED),  # the list is the whole list
        ([3], None, Execution.FAILED),
    ],
)
def test_a_finish_settles_the_jobs_success_exit_codes_as_successes(
    runner, issued, codes, exit_code, state
):
    execution = run(runner, JobFactory(success_exit_codes=codes))
    assert finish(issued[1], execution, exit_code) == state
    execution.refresh_from_db()
    assert (execution.state, execution.exit_code) == (state, exit_code)


def test_a_batch_finish_settles_them_alike(runner, issued):
    listed, only_three = JobFactory(success_exit_codes=[0, 3]), JobFactory(success_exit_codes=[3])
    runs = [run(runner, listed, 1), run(runner, listed, 2), run(runner, only_three, 3)]
    runs.append(run(runner, only_three, 4))
    answers = finish_many(issued[1], runner, zip(runs, (0, 3, 0, 3), strict=True))
    assert answers == ["succeeded", "succeeded", "failed", "succeeded"]
    assert [Execution.objects.get(pk=e.pk).state for e in runs] == answers


# -- logs: an older agent's output cut at the job's limit -----------------------------


def test_the_server_cuts_the_log_at_the_jobs_output_limit(runner, issued, settings):
    settings.CRONIQ_LOG_LIMIT = 8192
    execution = run(runner, JobFactory(max_output=1024))
    token = issued[0]
    dispatch.append_log(token, execution.pk, "s1", execution.lease, 0, "a" * 1000, DONE)
    dispatch.append_log(token, execution.pk, "s1", execution.lease, 1, "b" * 1000, DONE)
    execution.refresh_from_db()
    assert (execution.log_size, execution.log_truncated) == (1024, True)
    assert list(LogChunk.objects.values_list("data", flat=True)) == [
        "a" * 1000,
        "b" * 24 + LOG_TRUNCATED_MARKER.format(limit=1024),
    ]


def test_the_server_limit_wins_over_a_larger_output_limit(runner, issued, settings):
    settings.CRONIQ_LOG_LIMIT = 1024
    execution = run(runner, JobFactory(max_output=64 * MIB))
    dispatch.append_log(issued[0], execution.pk, "s1", execution.lease, 0, "a" * 2000, DONE)
    execution.refresh_from_db()
    assert (execution.log_size, execution.log_truncated) == (1024, True)


def test_a_limited_container_job_goes_to_an_agent_announcing_both_and_carries_its_limits(token):
    spec = {"image": "alpine:3.20", "args": [], "env": {}, "pull": "missing", "network": None}
    job = JobFactory(
        kind="container", command="", container=spec, labels=["linux"],
        max_output=4096, on_max_output="fail", success_exit_codes=[0, 3],
    )  # fmt: skip
    assert job.features == {"container", "limits"}
    run = pending(now=BEFORE, job=job)
    for name, features in (("no-engine", CURRENT), ("no-limits", (*OLDER, "container"))):
        lacking = runner_with(token, name, features)
        assert claims.claim(lacking, lacking.session, 5, NOW) == []
    found = handed(runner_with(token, "both", (*CURRENT, "container")))
    assert {k: found[run.pk][k] for k in ("kind", "container", "max_output", "on_max_output")} == {
        "kind": "container",
        "container": spec,
        "max_output": 4096,
        "on_max_output": "fail",
    }
    assert "success_exit_codes" not in found[run.pk]  # the server reads it at the end


def test_a_container_jobs_exit_code_is_settled_by_its_success_exit_codes(issued):
    # The container's exit code is the run's, read as a shell job's is.
    engine = RunnerFactory(
        token=issued[0], labels=[], session="s1", capacity=100, features=["container"]
    )
    spec = {"image": "alpine:3.20", "args": [], "env": {}, "pull": "missing", "network": None}
    job = JobFactory(kind="container", command="", container=spec, success_exit_codes=[0, 3])
    assert finish(issued[1], run(engine, job), 3) == Execution.SUCCEEDED
    assert finish(issued[1], run(engine, job, 1), 1) == Execution.FAILED
