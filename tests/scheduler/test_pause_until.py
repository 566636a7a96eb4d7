"""A job paused until an instant resumes by itself then (the loop's
`pauses_ended` step, scheduler.runs.operations.resume_ended_pauses)."""

import datetime as dt

import pytest

from audit.models import AuditEvent
from scheduler.firing.loop import SchedulerLoop
from scheduler.models import Execution, Job
from scheduler.runs import operations
from tests.factories import CalendarFactory, JobFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
UNTIL = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def paused(**fields):
    job = JobFactory(schedule="0 * * * *", **fields)
    operations.pause(Job.objects.filter(pk=job.pk), T0, None, reason="maintenance", until=UNTIL)
    return Job.objects.get(pk=job.pk)


def test_a_pause_stays_until_its_end_then_the_job_fires_from_there():
    job = paused()
    assert (job.paused_until, job.pause_reason, job.next_run_at) == (UNTIL, "maintenance", None)

    assert operations.resume_ended_pauses(UNTIL - dt.timedelta(seconds=1)) == 0
    assert operations.resume_ended_pauses(UNTIL + dt.timedelta(seconds=1)) == 1

    job.refresh_from_db()
    assert (job.paused_at, job.paused_until, job.pause_reason) == (None, None, "")
    # The occurrence at the pause's end fires.
    assert job.next_run_at == UNTIL
    event = AuditEvent.objects.get(action="job.resumed")
    assert (event.actor_kind, event.target_repr) == (AuditEvent.SYSTEM, job.name)
    assert event.data == {"paused_until": UNTIL.isoformat(), "next_run_at": UNTIL.isoformat()}
    assert operations.resume_ended_pauses(UNTIL + dt.timedelta(seconds=2)) == 0


def test_the_loop_resumes_and_then_fires_the_job():
    job = paused()
    loop = SchedulerLoop(clock=lambda: UNTIL + dt.timedelta(seconds=1))

    loop.tick(UNTIL + dt.timedelta(seconds=1))
    loop.tick(UNTIL + dt.timedelta(seconds=2))

    assert Execution.objects.filter(job=job, scheduled_for=UNTIL).exists()


def test_a_pause_without_an_end_stays_and_a_disabled_job_is_unpaused_but_not_scheduled():
    forever = JobFactory(schedule="0 * * * *")
    operations.pause(Job.objects.filter(pk=forever.pk), T0, None)
    disabled = paused(enabled=False)

    assert operations.resume_ended_pauses(UNTIL + dt.timedelta(days=1)) == 1

    forever.refresh_from_db()
    disabled.refresh_from_db()
    assert forever.paused_at == T0
    assert (disabled.paused_at, disabled.next_run_at) == (None, None)


def test_an_operators_resume_first_leaves_the_step_nothing_to_do():
    job = paused()
    operations.resume(Job.objects.filter(pk=job.pk), T0 + dt.timedelta(hours=1), None)
    job.refresh_from_db()
    assert (job.paused_until, job.pause_reason) == (None, "")

    assert operations.resume_ended_pauses(UNTIL + dt.timedelta(seconds=1)) == 0


def test_a_job_that_can_no_longer_be_scheduled_resumes_into_quarantine():
    job = paused(calendar=CalendarFactory(name="gone-wrong"))
    Job.objects.filter(pk=job.pk).update(timezone="Mars/Olympus")

    assert operations.resume_ended_pauses(UNTIL) == 1

    job.refresh_from_db()
    assert job.paused_at is None and job.next_run_at is None
    assert "Mars/Olympus" in job.error and job.error_at == UNTIL


def test_an_every_job_counts_from_the_pause_end_and_its_preview_says_so_while_paused():
    job = JobFactory(schedule="@every 10m", next_run_at=T0)
    operations.pause(Job.objects.filter(pk=job.pk), T0, None, until=UNTIL)
    job.refresh_from_db()
    expected = [UNTIL + dt.timedelta(minutes=10), UNTIL + dt.timedelta(minutes=20)]
    assert job.upcoming(T0 + dt.timedelta(minutes=1), 2) == expected  # during the pause

    operations.resume_ended_pauses(UNTIL)

    job.refresh_from_db()
    assert job.next_run_at == expected[0]  # not a microsecond before
    assert job.upcoming(UNTIL, 2) == expected


def test_a_paused_cron_jobs_preview_starts_at_the_occurrence_ending_the_pause():
    job = paused()
    assert job.upcoming(T0, 2) == [UNTIL, UNTIL + dt.timedelta(hours=1)]
