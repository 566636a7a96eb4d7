"""Jobs that are not singletons fire `ticks.FIRE_LEAD` before their instant;
nothing runs early, and an edit or a pause withdraws what is not yet due."""

import datetime as dt

import pytest

from scheduler import operations, ticks
from scheduler.loop import SchedulerLoop
from scheduler.models import Execution, Job
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


def test_a_singleton_job_fires_only_at_its_instant():
    """Whether its previous run is still live is decided at the instant."""
    JobFactory(schedule="@every 1s", next_run_at=T0, singleton=True)
    assert ticks.trigger_due(JUST_BEFORE, LEAD) == 0
    assert ticks.trigger_due(T0, LEAD) == 1


def test_an_execution_fired_ahead_is_not_claimable_before_its_instant():
    from runners.claims import ready_executions

    JobFactory(schedule="@every 1s", next_run_at=T0)
    ticks.trigger_due(JUST_BEFORE, LEAD)
    assert not ready_executions(JUST_BEFORE).exists()
    assert ready_executions(T0).count() == 1


def test_the_loop_wakes_the_lead_before_a_plain_job_and_at_a_singletons_instant():
    JobFactory(next_run_at=T0 + dt.timedelta(seconds=5), singleton=True)
    assert ticks.earliest_due(T0, LEAD) == T0 + dt.timedelta(seconds=5)
    JobFactory(next_run_at=T0 + dt.timedelta(seconds=5), singleton=False)
    assert ticks.earliest_due(T0, LEAD) == T0 + dt.timedelta(seconds=5) - LEAD
    assert ticks.earliest_due(T0) == T0 + dt.timedelta(seconds=5)


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
