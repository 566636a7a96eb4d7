"""`run_on_register` (docs/design.md §13): cron's @reboot for runners. A new
session of a runner (a start, a restart, a takeover) gets one run pinned to
it of each active job whose labels it carries; the same session
registering again gets none."""

import datetime as dt

from audit.models import AuditEvent
from dispatch import claims, identity
from scheduler.models import Execution, Job
from tests.factories import JobFactory
from tests.runners.conftest import NOW

LATER = NOW + dt.timedelta(minutes=5)
FEATURES = ["stdin", "run_as"]


def register(token, session="s1", now=NOW, labels=("linux",), features=FEATURES, name="web-1"):
    runner, _ = identity.register(
        token, name, session, now, labels=list(labels), features=features, version="0.3.0"
    )
    return runner


def on_register(**fields):
    fields.setdefault("labels", ["linux"])
    fields.setdefault("schedule", "")
    return JobFactory(run_on_register=True, **fields)


def runs(job):
    return list(Execution.objects.filter(job=job).order_by("id"))


def test_a_starting_runner_gets_one_pending_run_pinned_to_it(token):
    job = on_register()
    runner = register(token)
    [run] = runs(job)
    assert (run.state, run.trigger, run.pinned_to) == (Execution.PENDING, "register", "web-1")
    assert (run.scheduled_for, run.run_after, run.attempt) == (NOW, NOW, 1)
    event = AuditEvent.objects.get(action="job.register_run")
    assert event.data == {"execution": run.pk, "runner": "web-1"}
    # The normal path: the runner's poll claims it.
    [claimed] = claims.claim(runner, "s1", 1, NOW)
    assert claimed.pk == run.pk


def test_the_same_session_registering_again_is_no_start(token):
    job = on_register()
    register(token)
    register(token, now=LATER)  # a refresh or a reconnection after an outage
    assert len(runs(job)) == 1


def test_a_restart_with_a_new_session_is_a_start(token):
    job = on_register()
    runner = register(token)
    [first] = claims.claim(runner, "s1", 1, NOW)
    Execution.objects.filter(pk=first.pk).update(state=Execution.SUCCEEDED, finished_at=NOW)
    register(token, session="s2", now=LATER)  # a takeover: a new agent process
    started = [(r.trigger, r.scheduled_for, r.pinned_to) for r in runs(job)]
    assert started == [("register", NOW, "web-1"), ("register", LATER, "web-1")]


def test_a_run_the_restart_interrupted_is_retried_as_the_new_starts_run(token):
    job = on_register()
    runner = register(token)
    claims.claim(runner, "s1", 1, NOW)  # running when its agent restarts
    register(token, session="s2", now=LATER)
    lost, retry = runs(job)
    assert (lost.state, retry.trigger, retry.state) == ("lost", "retry", "pending")
    assert (retry.scheduled_for, retry.pinned_to) == (NOW, "web-1")
    skipped = AuditEvent.objects.get(action="job.register_run_skipped")
    assert skipped.data == {
        "reason": "a register run from an earlier start still waits on runner web-1"
    }


def test_a_run_still_waiting_from_an_earlier_start_is_not_doubled(token):
    job = on_register()
    register(token)
    register(token, session="s2", now=LATER)
    assert len(runs(job)) == 1
    skipped = AuditEvent.objects.get(action="job.register_run_skipped")
    assert skipped.data == {
        "reason": "a register run from an earlier start still waits on runner web-1"
    }


def test_each_matching_runner_gets_its_own_run_and_others_none(token):
    job = on_register(labels=["linux"])
    register(token, name="web-1")
    register(token, name="web-2", session="s2")
    register(token, name="win-1", session="s3", labels=["windows"])
    assert [r.pinned_to for r in runs(job)] == ["web-1", "web-2"]


def test_a_paused_disabled_or_quarantined_job_gets_no_run(token):
    paused = on_register(paused_at=NOW - dt.timedelta(hours=1))
    disabled = on_register(enabled=False)
    quarantined = on_register(error="cannot evaluate")
    not_on_register = JobFactory(labels=["linux"])
    register(token)
    for job in (paused, disabled, quarantined, not_on_register):
        assert runs(job) == []


def test_a_runner_whose_agent_lacks_a_feature_the_job_needs_gets_no_run(token):
    job = on_register(stdin="hello\n")
    register(token, features=[])
    assert runs(job) == []
    skipped = AuditEvent.objects.get(action="job.register_run_skipped")
    assert skipped.data == {
        "reason": "runner web-1's agent does not support stdin (version 0.3.0): "
        "upgrade croniq-runner"
    }


def test_an_agent_allowing_no_user_gets_no_run_of_a_run_as_job_and_the_audit_says_why(token):
    job = on_register(run_as="root")
    register(token, features=["stdin"])  # croniq-runner without --allow-run-as
    assert runs(job) == []
    skipped = AuditEvent.objects.get(action="job.register_run_skipped")
    assert skipped.data == {
        "reason": "runner web-1's agent does not allow (croniq-runner --allow-run-as) or "
        "predate run_as (version 0.3.0): name the job's user in its --allow-run-as, or "
        "upgrade croniq-runner"
    }


def test_a_singleton_job_with_a_live_run_skips_the_register_run(token):
    job = on_register(overlap=Job.SKIP, schedule="@daily")
    live = Execution.objects.create(
        job=job, scheduled_for=NOW, run_after=NOW, created_at=NOW, singleton=True
    )
    register(token)
    assert runs(job) == [live]
    skipped = AuditEvent.objects.get(action="job.register_run_skipped")
    assert "singleton" in skipped.data["reason"]


def test_a_scheduled_job_that_also_runs_on_register_keeps_its_schedule(token):
    job = on_register(schedule="0 3 * * *")
    register(token)
    assert [r.trigger for r in runs(job)] == ["register"]
    job.refresh_from_db()
    assert job.next_fire_after(NOW) == dt.datetime(2026, 6, 2, 3, 0, tzinfo=dt.UTC)
