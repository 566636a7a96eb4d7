"""run_on: all: one execution per matching online runner, pinned to it,
staggered; its retries, orphans, claims, chains and summary."""

import asyncio
import datetime as dt

import pytest
from django.core.exceptions import ValidationError

from audit.models import AuditEvent, Counter
from dispatch import claims, identity, loop_steps
from dispatch import leases as dispatch
from dispatch.hub import Waiter
from runners.models import Runner, RunnerToken
from scheduler.apply import document as applyfile
from scheduler.apply.document import ApplyError
from scheduler.firing import backfill, fanout, ticks
from scheduler.models import Execution, Job
from scheduler.runs import lifecycle, operations
from scheduler.runs.refusals import OperationRefused
from scheduler.triage import dead_letter_actions
from scheduler.triage.dead_letters import DeadLetter
from tests.factories import JobFactory, RunnerFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 2, 0, tzinfo=dt.UTC)
LATER = T0 + dt.timedelta(minutes=1)


@pytest.fixture
def fleet():
    """Three online runners with `linux` (created out of name order), and
    runners that must get nothing: one without the label, one offline, one
    drained."""
    runners = {
        name: RunnerFactory(name=name, labels=["linux", "x86"], last_seen_at=T0)
        for name in ("web-c", "web-a", "web-b")
    }
    RunnerFactory(name="mac-1", labels=["macos"], last_seen_at=T0)
    RunnerFactory(name="web-gone", labels=["linux"], state=Runner.OFFLINE, last_seen_at=T0)
    RunnerFactory(name="web-drained", labels=["linux"], drained=True, last_seen_at=T0)
    return runners


def cleanup(**fields):
    fields = {"name": "cleanup", "labels": ["linux"], "run_on": Job.ALL, **fields}
    return JobFactory(schedule="0 2 * * *", next_run_at=T0, **fields)


def runs(job, **filters):
    return list(Execution.objects.filter(job=job, **filters).order_by("pinned_to", "attempt"))


def claim(runner, now=T0, capacity=5):
    return claims.claim(runner, runner.session, capacity, now)


def held(execution):
    """Claimed as its runner would: running under lease 1."""
    Execution.objects.filter(pk=execution.pk).update(state=Execution.RUNNING, lease=1)
    execution.refresh_from_db()
    return execution


def test_an_occurrence_runs_once_on_each_matching_online_runner(fleet):
    job = cleanup()
    assert ticks.trigger_due(T0) == 3
    fired = runs(job)
    assert [e.pinned_to for e in fired] == ["web-a", "web-b", "web-c"]
    assert {(e.scheduled_for, e.attempt, e.state, e.run_after) for e in fired} == {
        (T0, 1, Execution.PENDING, T0)
    }


def test_stagger_spaces_the_runners_in_the_order_of_their_names(fleet):
    job = cleanup(stagger=30)
    ticks.trigger_due(T0)
    assert [(e.pinned_to, e.run_after - T0) for e in runs(job)] == [
        ("web-a", dt.timedelta(0)),
        ("web-b", dt.timedelta(seconds=30)),
        ("web-c", dt.timedelta(seconds=60)),
    ]
    # Not before its turn: web-b's run is not ready at the instant.
    assert claim(fleet["web-b"]) == []
    assert [e.pinned_to for e in claim(fleet["web-b"], T0 + dt.timedelta(seconds=30))] == ["web-b"]


def test_a_late_fire_keeps_the_runners_apart_counting_from_the_firing(fleet):
    job = cleanup(stagger=30)
    late = T0 + dt.timedelta(seconds=45)  # the loop was down past web-b's turn
    ticks.trigger_due(late)
    assert [(e.pinned_to, e.run_after - T0) for e in runs(job)] == [
        ("web-a", dt.timedelta(0)),  # late from its instant, as the detector measures
        ("web-b", dt.timedelta(seconds=75)),
        ("web-c", dt.timedelta(seconds=105)),
    ]
    assert [e.pinned_to for e in claim(fleet["web-b"], late)] == []  # not all at once


def test_an_edit_after_the_instant_keeps_the_staggered_runs_still_to_start(fleet):
    job = cleanup(stagger=30)
    ticks.trigger_due(T0)
    claim(fleet["web-a"])
    job.refresh_from_db()
    job.command = "echo changed"
    job.reschedule(T0 + dt.timedelta(seconds=10))
    assert [e.pinned_to for e in runs(job, state=Execution.PENDING)] == ["web-b", "web-c"]
    assert ticks.trigger_due(T0 + dt.timedelta(seconds=10)) == 0  # nothing fires twice


def test_each_runner_claims_its_own_run_and_no_other(fleet):
    job = cleanup()
    ticks.trigger_due(T0)
    [mine] = claim(fleet["web-a"])
    assert (mine.pinned_to, mine.runner_id) == ("web-a", fleet["web-a"].pk)
    assert claim(fleet["web-a"]) == []  # the others' runs are not its to take
    # A runner that comes online later gets no run of the past occurrence.
    late = RunnerFactory(name="web-0", labels=["linux"], last_seen_at=T0)
    assert claim(late) == []
    assert len(runs(job)) == 3


def test_the_hub_deals_each_pinned_run_to_its_runner(fleet):
    cleanup()
    ticks.trigger_due(T0)
    order = [fleet["web-c"], fleet["web-b"], fleet["web-a"]]
    loop = asyncio.new_event_loop()
    try:
        waiters = [Waiter(loop, r.pk, r.token, r.session, None) for r in order]
        served = claims.serve_waiters(waiters, T0, T0)
    finally:
        loop.close()
    by_runner = {w.runner_id: [a["id"] for a in h.assignments] for w, h in served}
    for runner in order:
        [pk] = by_runner[runner.pk]
        assert Execution.objects.get(pk=pk).pinned_to == runner.name


def test_no_matching_runner_online_records_the_occurrence_as_skipped():
    RunnerFactory(name="mac-1", labels=["macos"], last_seen_at=T0)
    job = cleanup()
    assert ticks.trigger_due(T0) == 0
    [skipped] = runs(job)
    assert (skipped.state, skipped.pinned_to) == (Execution.SKIPPED, "")
    assert "no runner with its labels was online" in skipped.error
    assert Counter.objects.get(name="croniq_fanout_unserved_total").value == 1
    assert Job.objects.get(pk=job.pk).next_run_at > T0  # the schedule moves on


def test_a_retry_stays_on_its_runner_and_counts_that_runners_attempts_only(fleet):
    job = cleanup(retries=1, retry_backoff=10)
    ticks.trigger_due(T0)
    a, b, _ = runs(job)
    retry_a = lifecycle.settle(held(a), Execution.FAILED, LATER, exit_code=1)
    assert (retry_a.pinned_to, retry_a.attempt) == ("web-a", 2)
    # web-b's first failure gets its own retry: web-a's do not use it up.
    retry_b = lifecycle.settle(held(b), Execution.FAILED, LATER, exit_code=1)
    assert (retry_b.pinned_to, retry_b.attempt) == ("web-b", 2)
    # web-a's second failure has no retry left.
    assert lifecycle.settle(held(retry_a), Execution.FAILED, LATER, exit_code=1) is None


def test_a_pinned_run_whose_runner_went_offline_is_lost_without_a_retry(fleet):
    job = cleanup(retries=3)
    ticks.trigger_due(T0)
    Runner.objects.filter(name="web-b").update(state=Runner.OFFLINE)
    assert loop_steps.drop_orphaned_pins(LATER) == 1
    lost = Execution.objects.get(job=job, pinned_to="web-b")
    assert (lost.state, lost.lost_reason) == (Execution.LOST, lifecycle.RUNNER_GONE)
    assert runs(job, pinned_to="web-b") == [lost]  # no retry: nobody else may run it
    assert AuditEvent.objects.filter(action="execution.given_up", target_id=str(lost.pk)).exists()
    assert runs(job, state=Execution.PENDING, pinned_to="web-a")  # the others wait as before
    # A forgotten runner's runs go the same way.
    Runner.objects.filter(name="web-c").delete()
    assert loop_steps.drop_orphaned_pins(LATER) == 1
    assert loop_steps.drop_orphaned_pins(LATER) == 0


def test_a_drained_runner_keeps_its_pinned_run_until_it_is_resumed(fleet):
    job = cleanup()
    ticks.trigger_due(T0)
    Runner.objects.filter(name="web-a").update(drained=True, state=Runner.DRAINING)
    assert loop_steps.drop_orphaned_pins(LATER) == 0
    assert runs(job, pinned_to="web-a")[0].state == Execution.PENDING


def test_replaying_one_runners_dead_letter_runs_it_again_on_that_runner_only(fleet):
    job = cleanup()
    ticks.trigger_due(T0)
    a, b, c = runs(job)
    for run in (a, c):
        success(run)
    lifecycle.settle(held(b), Execution.FAILED, LATER, exit_code=1)
    dead_letter = DeadLetter.objects.get(execution=b)
    replayed = dead_letter_actions.replay(dead_letter, LATER, actor=None)
    assert (replayed.pinned_to, replayed.attempt) == ("web-b", 2)
    assert len(runs(job, state=Execution.PENDING)) == 1


def success(execution):
    return lifecycle.settle(held(execution), Execution.SUCCEEDED, LATER, exit_code=0)


def chained(name):
    return list(Execution.objects.filter(job__name=name, trigger=Execution.CHAIN))


def test_chains_start_once_when_the_last_runner_has_finished(fleet):
    JobFactory(name="report", schedule="0 0 1 1 *")
    JobFactory(name="page", schedule="0 0 1 1 *")
    job = cleanup(on_success=["report"], on_failure=["page"])
    ticks.trigger_due(T0)
    a, b, c = runs(job)
    success(a)
    success(b)
    assert chained("report") == []  # web-c still has to run
    success(c)
    [report] = chained("report")
    assert report.upstream_id == c.pk
    assert chained("page") == []


def test_one_runner_failing_for_good_chains_on_failure_once(fleet, secret_token):
    JobFactory(name="report", schedule="0 0 1 1 *")
    JobFactory(name="page", schedule="0 0 1 1 *")
    job = cleanup(on_success=["report"], on_failure=["page"])
    ticks.trigger_due(T0)
    a, b, c = runs(job)
    lifecycle.settle(held(a), Execution.FAILED, LATER, exit_code=1)
    success(b)
    # The last one ends through the runner API's one-write success path.
    token, secret = secret_token
    Runner.objects.filter(name="web-c").update(token=token)
    [claimed] = claim(Runner.objects.get(name="web-c"))
    credential = identity.Credential(secret)
    state = dispatch.finish(
        credential, claimed.pk, claimed.session, claimed.lease, 0, "", False, LATER
    )
    assert state == Execution.SUCCEEDED
    assert len(chained("page")) == 1 and chained("report") == []


@pytest.fixture
def secret_token():
    return RunnerToken.issue("fleet-token")


def test_the_occurrence_shows_the_worst_of_its_runs(fleet):
    job = cleanup()
    ticks.trigger_due(T0)
    a, b, _ = runs(job)
    success(a)
    assert fanout.summary(a)["state"] == Execution.PENDING
    lifecycle.settle(held(b), Execution.TIMED_OUT, LATER)
    summary = fanout.summary(a)
    assert summary["state"] == Execution.TIMED_OUT
    assert summary["counts"] == {
        Execution.SUCCEEDED: 1,
        Execution.TIMED_OUT: 1,
        Execution.PENDING: 1,
    }
    assert fanout.summary(JobFactory().executions.create(
        scheduled_for=T0, run_after=T0, created_at=T0
    )) is None  # fmt: skip


def test_worst_ranks_lost_over_failed_over_running_over_succeeded():
    assert fanout.worst(["succeeded", "running", "failed"]) == "failed"
    assert fanout.worst(["succeeded", "lost", "timed_out"]) == "lost"
    assert fanout.worst(["succeeded", "succeeded"]) == "succeeded"
    assert fanout.worst([]) is None


def test_a_manual_run_goes_to_every_runner_and_is_refused_with_none(fleet):
    job = cleanup()
    first = operations.run_now(job, T0, actor=None)
    assert [e.pinned_to for e in first.occurrence] == ["web-a", "web-b", "web-c"]
    assert {e.trigger for e in runs(job)} == {Execution.MANUAL}
    lonely = cleanup(name="lonely", labels=["gpu"])
    with pytest.raises(OperationRefused, match="no runner with its labels"):
        operations.run_now(lonely, T0, actor=None)
    assert runs(lonely) == []


def test_a_backfill_runs_each_instant_on_every_runner(fleet):
    job = cleanup()
    result = backfill.backfill(job, T0 - dt.timedelta(days=2), T0, T0, actor=None)
    assert result.created == 2
    assert len(runs(job)) == 6
    Runner.objects.update(state=Runner.OFFLINE)
    with pytest.raises(OperationRefused, match="none with its labels is online"):
        backfill.backfill(job, T0 - dt.timedelta(days=4), T0 - dt.timedelta(days=2), T0, None)


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"singleton": True}, "run_on", "singleton: true"),
        ({"overlap": Job.QUEUE}, "run_on", "overlap: queue"),
        ({"run_on": Job.ONE, "stagger": 30}, "stagger", "only with run_on: all"),
        ({"run_on": "most"}, "run_on", "not a valid choice"),
    ],
)
def test_the_model_refuses_what_run_on_all_cannot_mean(fields, field, message):
    job = Job(name="cleanup", schedule="@daily", command="true", run_on=Job.ALL)
    for key, value in fields.items():
        setattr(job, key, value)
    with pytest.raises(ValidationError) as caught:
        job.full_clean()
    assert message in " ".join(caught.value.message_dict[field])


def job_item(**fields):
    return {"name": "cleanup", "schedule": "@daily", "command": "true", **fields}


def test_apply_refuses_run_on_all_with_singleton_naming_the_field():
    with pytest.raises(ApplyError) as caught:
        applyfile.apply({"jobs": [job_item(run_on="all", singleton=True)]}, now=T0)
    assert any(e.startswith("jobs[0].run_on:") for e in caught.value.errors)
    assert not Job.objects.exists()


def test_apply_reads_run_on_and_a_stagger_duration():
    applyfile.apply({"jobs": [job_item(run_on="all", stagger="2m")]}, now=T0)
    job = Job.objects.get(name="cleanup")
    assert (job.run_on, job.stagger) == (Job.ALL, 120)
