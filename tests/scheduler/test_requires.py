"""`requires` (docs/design.md §14): an occurrence runs only when each job it
names has a run that succeeded within its window before the instant;
otherwise `requires_policy` waits, skips or fails it. The decision at fixed
instants, then the fire step, the release on a success and the loop's step."""

import datetime as dt

import pytest

from audit.models import AuditEvent
from dispatch import claims, identity
from dispatch import leases as dispatch
from notifications import messages
from notifications.models import Event
from runners.models import RunnerToken
from scheduler.firing import ticks
from scheduler.jobs import requires
from scheduler.models import DeadLetter, Execution
from scheduler.runs import lifecycle, overlap, requirements
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

T0 = dt.datetime(2026, 6, 1, 8, 30, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
US = dt.timedelta(microseconds=1)
NEEDS = [{"job": "import", "succeeded_within": 7200}]


# -- the decision, pure ------------------------------------------------------


@pytest.mark.parametrize(
    "success, met",
    [
        (T0 - HOUR, True),  # within the window
        (T0 - 2 * HOUR, True),  # at its start: included
        (T0 - 2 * HOUR - US, False),  # just before it
        (T0 + HOUR, True),  # since the instant: releases a waiting run
        (None, False),  # never succeeded
    ],
)
def test_a_requirement_is_met_by_a_success_within_the_window_or_since(success, met):
    latest = {} if success is None else {"import": success}
    missing = requires.unmet(NEEDS, T0, latest)
    assert missing == (() if met else (requires.Requirement("import", 2 * HOUR),))


def test_every_job_named_must_have_succeeded():
    needs = [*NEEDS, {"job": "sync", "succeeded_within": 600}]
    missing = requires.unmet(needs, T0, {"import": T0 - HOUR, "sync": T0 - HOUR})
    assert [need.job for need in missing] == ["sync"]


@pytest.mark.parametrize(
    "policy, decision",
    [
        ("wait", requires.Decision("wait", ("x",), T0 + HOUR)),
        ("skip", requires.Decision("skip", ("x",))),
        ("fail", requires.Decision("fail", ("x",))),
    ],
)
def test_an_unmet_occurrence_does_what_its_policy_says(policy, decision):
    assert requires.decide(policy, 3600, ("x",), T0) == decision


def test_a_met_occurrence_runs_whatever_the_policy():
    assert requires.decide("fail", 3600, (), T0) == requires.Decision("run")


@pytest.mark.parametrize(
    "now, action", [(T0 + HOUR - US, "wait"), (T0 + HOUR, "skip"), (T0 + 2 * HOUR, "skip")]
)
def test_a_waiting_run_is_skipped_once_its_timeout_has_passed(now, action):
    assert requires.decide("wait", 3600, ("x",), now, waiting_until=T0 + HOUR).action == action
    assert requires.decide("wait", 3600, (), now, waiting_until=T0 + HOUR).action == "run"


# -- the fire step and the release -------------------------------------------


@pytest.fixture
def upstream(db):
    return JobFactory(name="import", schedule="0 0 1 1 *", next_run_at=None)


def report(**fields):
    fields = {"schedule": "30 8 * * *", **fields}
    return JobFactory(name="report", next_run_at=T0, requires=NEEDS, **fields)


def succeeded(job, at):
    return ExecutionFactory(
        job=job,
        scheduled_for=at - dt.timedelta(minutes=5),
        state=Execution.SUCCEEDED,
        finished_at=at,
    )


def runs(job):
    return list(Execution.objects.filter(job=job).order_by("id"))


def audited(action):
    return list(AuditEvent.objects.filter(action=action).order_by("id"))


def events():
    return list(Event.objects.filter(name="execution.requirements_unmet").order_by("id"))


def test_an_occurrence_whose_requirements_are_met_runs(upstream):
    job = report()
    succeeded(upstream, T0 - HOUR)
    assert ticks.trigger_due(T0) == 1
    [run] = runs(job)
    assert (run.state, run.requires_until) == (Execution.PENDING, None)
    assert audited("execution.requirements_unmet") == []


def test_a_job_with_requirements_is_decided_at_its_instant_not_ahead(upstream):
    job = report()
    held = ticks.Held()
    assert ticks.trigger_due(T0 - dt.timedelta(milliseconds=100), ticks.FIRE_LEAD, held) == 0
    assert held == {job.pk} and runs(job) == []
    succeeded(upstream, T0 - dt.timedelta(milliseconds=50))  # within the lead
    ticks.trigger_due(T0, ticks.FIRE_LEAD, held)
    assert [run.state for run in runs(job)] == [Execution.PENDING]


def test_an_unmet_occurrence_waits_and_a_success_releases_it_at_once(upstream):
    job = report()
    succeeded(upstream, T0 - 3 * HOUR)  # outside the window
    ticks.trigger_due(T0)
    [run] = runs(job)
    assert (run.state, run.requires_until) == (Execution.QUEUED, T0 + HOUR)
    [unmet] = audited("execution.requirements_unmet")
    assert unmet.data["policy"] == "wait" and unmet.data["outcome"] == "waiting"
    assert unmet.data["unmet"] == [{"job": "import", "since": (T0 - 2 * HOUR).isoformat()}]
    [event] = events()
    assert (event.execution_id, event.data["waiting_until"]) == (run.pk, (T0 + HOUR).isoformat())
    # Not the overlap policy's to promote: neither its safety net nor the end
    # of another run of the job.
    assert overlap.promote_waiting(T0) == 0
    manual = ExecutionFactory(
        job=job, trigger=Execution.MANUAL, scheduled_for=T0 - HOUR, state=Execution.RUNNING
    )
    lifecycle.settle(manual, Execution.FAILED, T0 + HOUR / 4, exit_code=1)
    run.refresh_from_db()
    assert run.state == Execution.QUEUED
    assert requirements.settle_waiting(T0 + HOUR / 2) == 0  # still waiting

    importing = ExecutionFactory(job=upstream, scheduled_for=T0, state=Execution.RUNNING, lease=1)
    lifecycle.settle(importing, Execution.SUCCEEDED, T0 + HOUR / 2, exit_code=0)

    run.refresh_from_db()
    assert (run.state, run.requires_until, run.run_after) == (
        Execution.PENDING,
        None,
        T0 + HOUR / 2,
    )
    assert audited("execution.requirements_met")[0].target_id == str(run.pk)


@pytest.mark.parametrize("batch", [False, True])
def test_a_success_a_runner_reports_releases_the_waiting_run(upstream, batch):
    """The success fast paths (one finish, and a batch of them) release too."""
    job = report()
    ticks.trigger_due(T0)
    token, secret = RunnerToken.issue("r")
    runner = RunnerFactory(token=token, labels=[], session="s1", capacity=5)
    ExecutionFactory(job=upstream, scheduled_for=T0)
    [held] = claims.claim(runner, "s1", 1, T0)
    credential = identity.Credential(secret)
    if batch:
        report_ = [(held.pk, held.lease, 0, "", False)]
        dispatch.finish_many(credential, runner.pk, "s1", report_, T0 + HOUR / 2)
    else:
        dispatch.finish(credential, held.pk, "s1", held.lease, 0, "", False, T0 + HOUR / 2)
    assert [run.state for run in runs(job)] == [Execution.PENDING]


def test_a_wait_that_times_out_is_skipped_by_the_loop_and_notified(upstream):
    job = report(requires_timeout=600)
    ticks.trigger_due(T0)
    assert requirements.settle_waiting(T0 + dt.timedelta(seconds=599)) == 0
    assert requirements.settle_waiting(T0 + dt.timedelta(seconds=600)) == 1
    [run] = runs(job)
    assert run.state == Execution.SKIPPED
    assert run.error.startswith("skipped: requirements unmet: import has not succeeded since")
    [skip] = audited("execution.skipped")
    assert skip.data == {"reason": "requirements", "waited": 600.0}
    waiting, given_up = events()
    assert messages.summary(waiting) == (
        "report's 08:30 UTC run waits: import has not succeeded since 06:30 UTC "
        "(it waits until 08:40 UTC)"
    )
    assert messages.summary(given_up) == (
        "report's 08:30 UTC run was skipped: import has not succeeded since 06:30 UTC"
    )


def test_a_job_with_its_most_runs_waiting_skips_its_next_unmet_occurrence(upstream, monkeypatch):
    monkeypatch.setattr(requirements, "MAX_WAITING", 1)
    job = report(schedule="*/5 * * * *")
    ticks.trigger_due(T0)
    ticks.trigger_due(T0 + dt.timedelta(minutes=5))
    assert [run.state for run in runs(job)] == [Execution.QUEUED, Execution.SKIPPED]
    data = [event.data for event in audited("execution.requirements_unmet")]
    assert [(d["policy"], d["outcome"], d.get("waiting")) for d in data] == [
        ("wait", "waiting", None),
        ("wait", "skipped", 1),
    ]


def test_the_loop_releases_a_run_whose_success_came_without_a_release(upstream):
    """A success committed while the fire step decided: the step finds it."""
    job = report()
    ticks.trigger_due(T0)
    succeeded(upstream, T0 + dt.timedelta(seconds=1))  # written with no settle
    assert requirements.settle_waiting(T0 + dt.timedelta(seconds=5)) == 1
    assert [run.state for run in runs(job)] == [Execution.PENDING]


def test_a_released_run_meets_its_overlap_policy(upstream):
    job = report(overlap="skip", singleton=True)
    ticks.trigger_due(T0)
    live = ExecutionFactory(job=job, scheduled_for=T0 - HOUR, state=Execution.RUNNING)
    succeeded(upstream, T0 + dt.timedelta(seconds=1))
    requirements.settle_waiting(T0 + dt.timedelta(seconds=5))
    waited = Execution.objects.get(job=job, scheduled_for=T0)
    assert waited.state == Execution.SKIPPED and "singleton" in waited.error
    live.refresh_from_db()
    assert live.state == Execution.RUNNING


def test_a_released_run_is_not_queued_behind_itself(upstream):
    job = report(overlap="queue")
    ticks.trigger_due(T0)
    succeeded(upstream, T0 + dt.timedelta(seconds=1))
    requirements.settle_waiting(T0 + dt.timedelta(seconds=5))
    assert [run.state for run in runs(job)] == [Execution.PENDING]


def test_a_released_run_of_a_run_on_all_job_runs_on_each_online_runner(upstream):
    job = report(labels=["linux"], run_on="all")
    ticks.trigger_due(T0)
    for name in ("web-2", "web-1"):
        RunnerFactory(name=name, labels=["linux"], last_seen_at=T0)
    [waiting] = runs(job)
    succeeded(upstream, T0 + dt.timedelta(seconds=1))
    requirements.settle_waiting(T0 + dt.timedelta(seconds=5))
    pinned = [(run.pk, run.pinned_to, run.state) for run in runs(job)]
    assert pinned[0] == (waiting.pk, "web-1", Execution.PENDING)  # the waiting row, pinned
    assert pinned[1][1:] == ("web-2", Execution.PENDING)


def test_skip_skips_the_occurrence_at_once_audited_and_notified(upstream):
    job = report(requires_policy="skip")
    ticks.trigger_due(T0)
    [run] = runs(job)
    assert run.state == Execution.SKIPPED and run.finished_at == T0
    [unmet] = audited("execution.requirements_unmet")
    assert (unmet.data["policy"], unmet.data["outcome"]) == ("skip", "skipped")
    assert len(events()) == 1


def test_fail_fails_the_run_for_good_with_a_dead_letter_and_its_events(upstream):
    job = report(requires_policy="fail", retries=3)
    ticks.trigger_due(T0)
    [run] = runs(job)  # no retry: it would run without its requirements
    assert (run.state, run.error) == (Execution.FAILED, "requirements unmet")
    assert DeadLetter.objects.get().execution_id == run.pk
    names = set(Event.objects.values_list("name", flat=True))
    assert {"execution.requirements_unmet", "execution.given_up", "job.failing"} <= names
    assert audited("execution.requirements_unmet")[0].data["outcome"] == "failed"


def test_a_run_someone_asked_for_is_not_held(upstream):
    job = report()
    assert requirements.Gate(T0).admits(job, Execution(job=job, trigger=Execution.MANUAL))
    assert not requirements.Gate(T0).admits(job, Execution(job=job, scheduled_for=T0))


def test_unmet_occurrences_are_counted_per_job_on_metrics(upstream, client):
    report(requires_policy="skip")
    ticks.trigger_due(T0)
    scrape = client.get("/metrics").content.decode()
    assert "# HELP croniq_requirements_unmet_total Occurrences whose job's" in scrape
    assert 'croniq_requirements_unmet_total{job="report"} 1.0' in scrape
