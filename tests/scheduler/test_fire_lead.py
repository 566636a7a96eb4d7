"""Jobs fire `ticks.FIRE_LEAD` before their instant (one with an overlap
policy only while none of its runs is open: otherwise it is held back to
the instant, where its policy decides); nothing runs early, and an edit or
a pause withdraws what is not yet due."""

import datetime as dt

import pytest

from scheduler.firing import ticks
from scheduler.firing.loop import SchedulerLoop
from scheduler.models import Execution, Job
from scheduler.runs import operations
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
LEAD = dt.timedelta(milliseconds=200)
JUST_BEFORE = T0 - dt.timedelta(milliseconds=150)


def test_a_job_fires_within_the_lead_for_its_instant_not_for_now():
    job = JobFactory(schedule="@every 1s", next_run_at=T0)

    assert ticks.trigger_due(JUST_BEFORE, LEAD) == 1

    execution = Execution.objects.get(job=job)
    assert (execution.scheduled_for, execution.run_after) == (T0, T0)
    assert execution.created_at == JUST_BEFORE
    job.refresh_from_db()
    assert job.next_run_at == T0 + dt.timedelta(seconds=1)
    assert job.last_scheduled_at == T0


def test_nothing_fires_before_the_lead():
    JobFactory(schedule="@every 1s", next_run_at=T0)
    assert ticks.trigger_due(T0 - dt.timedelta(milliseconds=250), LEAD) == 0
    assert ticks.trigger_due(JUST_BEFORE) == 0  # no lead, no early fire


def test_an_idle_singleton_job_fires_ahead_and_the_index_still_allows_one_live_run():
    job = JobFactory(schedule="@every 1s", next_run_at=T0, singleton=True)
    assert ticks.trigger_due(JUST_BEFORE, LEAD) == 1
    prepared = Execution.objects.get(job=job)
    assert (prepared.scheduled_for, prepared.run_after, prepared.singleton) == (T0, T0, True)
    # A manual run in between meets the prepared one, as it would a live run.
    with pytest.raises(operations.OperationRefused):
        operations.run_now(job, JUST_BEFORE, actor=None)


@pytest.mark.parametrize("state", [Execution.RUNNING, Execution.PENDING, Execution.QUEUED])
@pytest.mark.parametrize("policy", [Job.SKIP, Job.QUEUE, Job.REPLACE])
def test_a_job_with_an_open_run_is_held_back_to_its_instant(policy, state):
    """Whether its open run is still live is decided at the instant."""
    job = JobFactory(schedule="@every 1s", next_run_at=T0, overlap=policy)
    Execution.objects.create(
        job=job, scheduled_for=T0 - dt.timedelta(seconds=1), run_after=T0 - dt.timedelta(seconds=1),
        created_at=T0, state=state, singleton=False,
    )  # fmt: skip
    held = ticks.Held()
    assert ticks.trigger_due(JUST_BEFORE, LEAD, held) == 0
    assert held == {job.pk}
    job.refresh_from_db()
    assert job.next_run_at == T0
    # The loop wakes for it at the instant, not the lead before.
    assert ticks.earliest_due(JUST_BEFORE, LEAD, held) == T0
    assert ticks.earliest_due(JUST_BEFORE, LEAD) == T0 - LEAD
    # Held back again while it is ahead, then decided at the instant.
    assert ticks.trigger_due(JUST_BEFORE + dt.timedelta(milliseconds=50), LEAD, held) == 0
    Execution.objects.filter(job=job).update(state=Execution.SUCCEEDED)
    ticks.trigger_due(T0, LEAD, held)
    assert held == set()
    assert Execution.objects.get(job=job, scheduled_for=T0).state == Execution.PENDING


def test_a_held_back_singleton_is_skipped_at_its_instant_when_its_run_still_lives():
    job = JobFactory(schedule="@every 1s", next_run_at=T0, singleton=True)
    Execution.objects.create(
        job=job, scheduled_for=T0 - dt.timedelta(seconds=1), run_after=T0 - dt.timedelta(seconds=1),
        created_at=T0, state=Execution.RUNNING, singleton=True,
    )  # fmt: skip
    held = ticks.Held()
    assert ticks.trigger_due(JUST_BEFORE, LEAD, held) == 0
    assert ticks.trigger_due(T0, LEAD, held) == 0
    assert Execution.objects.get(job=job, scheduled_for=T0).state == Execution.SKIPPED


def test_many_held_back_jobs_do_not_stall_the_batches(monkeypatch):
    monkeypatch.setattr(ticks, "TRIGGER_BATCH", 3)
    for _ in range(7):
        job = JobFactory(schedule="@every 1s", next_run_at=T0, singleton=True)
        Execution.objects.create(
            job=job, scheduled_for=T0 - dt.timedelta(seconds=1),
            run_after=T0 - dt.timedelta(seconds=1), created_at=T0, state=Execution.RUNNING,
            singleton=True,
        )  # fmt: skip
    plain = JobFactory(schedule="@every 1s", next_run_at=T0)
    held = ticks.Held()
    assert ticks.trigger_due(JUST_BEFORE, LEAD, held) == 1
    assert len(held) == 7 and Execution.objects.filter(job=plain).count() == 1


def test_an_execution_fired_ahead_is_not_claimable_before_its_instant():
    from dispatch.claims import ready_executions

    JobFactory(schedule="@every 1s", next_run_at=T0)
    ticks.trigger_due(JUST_BEFORE, LEAD)
    assert not ready_executions(JUST_BEFORE).exists()
    assert ready_executions(T0).count() == 1


def test_the_loop_wakes_the_lead_before_the_earliest_job():
    JobFactory(next_run_at=T0 + dt.timedelta(seconds=5), singleton=True)
    assert ticks.earliest_due(T0, LEAD) == T0 + dt.timedelta(seconds=5) - LEAD
    JobFactory(next_run_at=T0 + dt.timedelta(seconds=3), singleton=False)
    assert ticks.earliest_due(T0, LEAD) == T0 + dt.timedelta(seconds=3) - LEAD
    assert ticks.earliest_due(T0) == T0 + dt.timedelta(seconds=3)


def test_the_scheduler_loop_fires_with_its_lead():
    JobFactory(schedule="@every 1s", next_run_at=T0)
    loop = SchedulerLoop(clock=lambda: JUST_BEFORE)
    assert loop.tick(JUST_BEFORE).get("fired") == 1


def test_an_edit_withdraws_what_was_fired_ahead_and_keeps_the_instant():
    job = JobFactory(schedule="* * * * *", next_run_at=T0)
    ticks.trigger_due(JUST_BEFORE, LEAD)
    job.refresh_from_db()

    job.schedule = "*/2 * * * *"
    job.reschedule(T0 - dt.timedelta(milliseconds=100))

    assert not Execution.objects.filter(job=job).exists()
    assert job.next_run_at == T0  # the instant is not skipped: the new schedule fires it


def test_pausing_withdraws_what_was_fired_ahead_but_not_what_is_due():
    due = JobFactory(schedule="@every 1h", next_run_at=T0 - dt.timedelta(seconds=1))
    ahead = JobFactory(schedule="@every 1s", next_run_at=T0)
    ticks.trigger_due(T0 - dt.timedelta(seconds=1))
    ticks.trigger_due(JUST_BEFORE, LEAD)
    assert Execution.objects.filter(job=due).count() == 1

    operations.pause(Job.objects.all(), T0 - dt.timedelta(milliseconds=100), actor=None)

    assert Execution.objects.filter(job=due).count() == 1  # already due: it runs
    assert not Execution.objects.filter(job=ahead).exists()


def test_a_retry_waiting_for_its_backoff_is_not_withdrawn():
    job = JobFactory(schedule="@every 1s", next_run_at=T0 + dt.timedelta(seconds=30))
    Execution.objects.create(
        job=job,
        scheduled_for=T0 - dt.timedelta(seconds=5),
        run_after=T0 + dt.timedelta(seconds=10),
        attempt=2,
        created_at=T0,
    )
    assert job.withdraw_ahead(T0) == 0
    assert Execution.objects.filter(job=job).count() == 1
