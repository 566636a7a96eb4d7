"""The loop and a job's timing beyond its one schedule (docs/design.md §14):
it fires what `Job.upcoming` previewed, once per instant, inside the bounds;
with `max_runs` it counts every due occurrence and completes the job after
the last, disabling it (audited `job.completed`)."""

import datetime as dt

import pytest
from django.test import override_settings

from audit.models import AuditEvent
from scheduler.firing import misfires, ticks
from scheduler.models import Execution, Job
from tests.factories import T0, JobFactory

pytestmark = pytest.mark.django_db

MINUTE = dt.timedelta(minutes=1)


def fired(job):
    return list(
        Execution.objects.filter(job=job)
        .order_by("scheduled_for")
        .values_list("scheduled_for", "trigger")
    )


def tick_through(job, instants):
    """Run the fire step at each instant, as the loop would."""
    for instant in instants:
        ticks.trigger_due(instant)
    job.refresh_from_db()


def new_job(**fields):
    found = Job(name=fields.pop("name", "limited"), command="true", **fields)
    found.full_clean()
    found.reschedule(T0)
    found.save()
    return found


def test_the_loop_fires_what_the_preview_showed_and_completes_after_max_runs():
    job = new_job(
        schedule="*/10 * * * *",
        schedules=["*/15 * * * *"],
        at=["2026-06-01T12:07:00Z"],
        max_runs=5,
    )
    preview = job.upcoming(T0, 10)
    assert len(preview) == 5
    tick_through(job, [T0 + n * MINUTE for n in range(61)])

    assert (
        [instant for instant, _ in fired(job)]
        == preview
        == [
            T0 + 7 * MINUTE,
            T0 + 10 * MINUTE,
            T0 + 15 * MINUTE,
            T0 + 20 * MINUTE,
            T0 + 30 * MINUTE,  # both schedules' instant: one run
        ]
    )
    assert (job.enabled, job.completed, job.next_run_at) == (False, True, None)
    assert job.scheduled_runs == 5
    event = AuditEvent.objects.get(action="job.completed")
    assert event.data == {"max_runs": 5, "last": (T0 + 30 * MINUTE).isoformat()}
    assert not AuditEvent.objects.filter(action="job.exhausted").exists()


def test_one_shot_instants_fire_once_each_then_the_job_is_exhausted():
    job = new_job(schedule="", at=["2026-06-01T12:03:00Z", "2026-06-01T12:01:00+00:00"])
    tick_through(job, [T0 + n * MINUTE for n in range(6)])
    assert fired(job) == [(T0 + MINUTE, "schedule"), (T0 + 3 * MINUTE, "schedule")]
    assert job.next_run_at is None and job.enabled
    assert AuditEvent.objects.filter(action="job.exhausted").count() == 1


def test_nothing_fires_outside_the_bounds():
    job = new_job(
        schedule="* * * * *",
        not_before=T0 + 2 * MINUTE,
        not_after=T0 + 4 * MINUTE,
    )
    tick_through(job, [T0 + n * MINUTE for n in range(8)])
    assert [i for i, _ in fired(job)] == [T0 + 2 * MINUTE, T0 + 3 * MINUTE, T0 + 4 * MINUTE]
    assert job.next_run_at is None


@override_settings(CRONIQ_MISFIRE_GRACE=60)
def test_missed_occurrences_count_towards_max_runs():
    # Down from 12:00 to 12:10: ten occurrences came due (12:01 to 12:10),
    # eight of them missed; run_once runs none of those, as the on-time
    # ones cover the gap.
    job = new_job(schedule="* * * * *", max_runs=11)
    tick_through(job, [T0 + 10 * MINUTE])
    assert fired(job) == [(T0 + 9 * MINUTE, "schedule"), (T0 + 10 * MINUTE, "schedule")]
    assert job.scheduled_runs == 10 and job.enabled
    tick_through(job, [T0 + 11 * MINUTE])
    assert job.completed and not job.enabled
    assert [i for i, _ in fired(job)][-1] == T0 + 11 * MINUTE


@override_settings(CRONIQ_MISFIRE_GRACE=60)
def test_an_outage_too_long_to_list_is_still_counted_one_by_one(monkeypatch):
    monkeypatch.setattr(misfires, "ENUMERATION_LIMIT", 5)
    job = new_job(schedule="* * * * *", max_runs=40, misfire_policy=Job.SKIP)
    tick_through(job, [T0 + 20 * MINUTE])  # 12:01 to 12:20 due, 5 listed
    assert job.scheduled_runs == 20
    assert job.next_run_at == T0 + 21 * MINUTE
    tick_through(job, [T0 + 100 * MINUTE])  # the 20 left come in the outage
    assert job.completed and job.next_run_at is None
    assert job.last_scheduled_at == T0 + 40 * MINUTE
    assert not Execution.objects.filter(job=job, scheduled_for__gt=T0 + 40 * MINUTE).exists()


def test_an_occurrence_the_overlap_policy_skips_still_counts():
    job = new_job(schedule="* * * * *", overlap=Job.SKIP, max_runs=2)
    tick_through(job, [T0 + MINUTE, T0 + 2 * MINUTE])  # the first still pending at 12:02
    assert [e.state for e in Execution.objects.filter(job=job).order_by("scheduled_for")] == [
        Execution.PENDING,
        Execution.SKIPPED,
    ]
    assert job.completed


def test_a_run_withdrawn_before_its_instant_is_given_back():
    # The loop creates the last run ahead of its instant and completes the
    # job; an edit in between withdraws that run: the occurrence has not
    # happened, so the job is not complete and fires it after all.
    job = new_job(schedule="*/5 * * * *", max_runs=1)
    ticks.trigger_due(T0 + 5 * MINUTE - dt.timedelta(milliseconds=100), ticks.FIRE_LEAD)
    job.refresh_from_db()
    assert job.completed and not job.enabled
    assert Execution.objects.filter(job=job).count() == 1

    job.timeout = 30  # any edit the loop must see before the instant
    job.reschedule(T0 + 5 * MINUTE - dt.timedelta(milliseconds=50))
    job.save()
    job.refresh_from_db()
    assert not Execution.objects.filter(job=job).exists()
    assert (job.scheduled_runs, job.enabled, job.next_run_at) == (0, True, T0 + 5 * MINUTE)

    tick_through(job, [T0 + 5 * MINUTE])
    assert fired(job) == [(T0 + 5 * MINUTE, "schedule")]
    assert job.completed


def test_raising_max_runs_runs_a_completed_job_again():
    job = new_job(schedule="* * * * *", max_runs=1)
    tick_through(job, [T0 + MINUTE])
    assert job.completed
    job.max_runs, job.enabled = 3, True
    job.full_clean()
    job.reschedule(T0 + MINUTE)
    job.save()
    tick_through(job, [T0 + 2 * MINUTE, T0 + 3 * MINUTE, T0 + 4 * MINUTE])
    assert [i for i, _ in fired(job)] == [T0 + n * MINUTE for n in (1, 2, 3)]
    assert job.completed and not job.enabled


def test_a_job_without_a_limit_keeps_no_count():
    job = JobFactory(schedule="* * * * *", next_run_at=T0)
    tick_through(job, [T0, T0 + MINUTE])
    assert job.scheduled_runs == 0 and job.enabled


def test_a_backfill_runs_the_unions_past_instants_neither_counted_nor_limited():
    from scheduler.firing import backfill

    job = new_job(schedule="0 * * * *", schedules=["30 * * * *"], max_runs=1)
    done = backfill.backfill(job, T0 - 2 * 60 * MINUTE, T0, T0, ("user", "ops"), dry_run=True)
    assert done.instants == [T0 - n * 30 * MINUTE for n in (4, 3, 2, 1)]
    job.refresh_from_db()
    assert (job.scheduled_runs, job.completed) == (0, False)
