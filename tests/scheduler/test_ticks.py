"""The trigger, timeout, retry and reaper ticks, at fixed instants."""

import datetime as dt

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEvent, Counter
from dispatch import loop_steps
from scheduler.firing import ticks
from scheduler.models import Execution, Job
from scheduler.runs import lifecycle
from tests.factories import CalendarFactory, ExecutionFactory, JobFactory, RunnerFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)  # a Monday


def at(minutes=0, seconds=0):
    return T0 + dt.timedelta(minutes=minutes, seconds=seconds)


def counter(name, **labels):
    from audit.recording import labels_key

    return Counter.objects.value_of(name, labels_key(labels))


def test_a_due_job_fires_once_and_advances_to_its_next_instant():
    job = JobFactory(schedule="*/5 * * * *", next_run_at=at(0))

    assert ticks.trigger_due(at(0, 0.01)) == 1
    assert ticks.trigger_due(at(0, 0.02)) == 0

    execution = Execution.objects.get(job=job)
    assert execution.scheduled_for == at(0)
    assert execution.state == Execution.PENDING
    assert execution.run_after == at(0)
    job.refresh_from_db()
    assert job.next_run_at == at(5)
    assert job.last_scheduled_at == at(0)


def test_the_locking_query_finds_the_due_jobs_as_due_jobs_says_earliest_first():
    """lock_due_jobs is SQL written by hand; due_jobs says the same in the
    ORM. Both must pick the same jobs."""
    second = dt.timedelta(seconds=1)
    lead = dt.timedelta(milliseconds=200)
    large_instant = T0 + 3 * second  # fired ahead (`Firing.ahead`)
    calendar = CalendarFactory()
    due = JobFactory(next_run_at=T0 - second, calendar=calendar)
    within_lead = JobFactory(next_run_at=T0 + lead / 2)
    held_within_lead = JobFactory(next_run_at=T0 + lead / 2)
    held_and_due = JobFactory(next_run_at=T0 - 2 * second)
    ahead = JobFactory(next_run_at=large_instant)
    JobFactory(next_run_at=T0 + 3600 * second)
    JobFactory(next_run_at=T0 - second, enabled=False)
    JobFactory(next_run_at=T0 - second, paused_at=T0 - 3600 * second)
    JobFactory(next_run_at=None)  # quarantined
    held = {held_within_lead.pk, held_and_due.pk}

    jobs = ticks.lock_due_jobs(T0, lead, held, {large_instant})

    assert [job.pk for job in jobs] == [held_and_due.pk, due.pk, within_lead.pk, ahead.pk]
    orm = ticks.due_jobs(T0, lead, held, {large_instant})
    assert {job.pk for job in jobs} == set(orm.values_list("pk", flat=True))
    with CaptureQueriesContext(connection) as queries:
        assert jobs[1].calendar == calendar  # read with the jobs
    assert len(queries) == 0
    with CaptureQueriesContext(connection) as queries:
        assert ticks.lock_due_jobs(T0, lead, held, pk=within_lead.pk) == [within_lead]
    assert len(queries) == 1  # no calendar, no query for one
    assert ticks.lock_due_jobs(T0, lead, held, pk=held_within_lead.pk) == []


def test_a_locked_job_holds_every_field_as_the_orm_reads_it():
    """lock_due_jobs reads its rows itself: each value converted as the
    ORM's (JSON, instants, booleans, the calendar's id)."""
    job = JobFactory(
        next_run_at=T0 - dt.timedelta(seconds=1),
        labels=["linux", "db"],
        env={"REPORT": "daily", "N": 3},
        calendar=CalendarFactory(),
        last_scheduled_at=T0 - dt.timedelta(minutes=5),
        singleton=True,
    )

    [locked] = ticks.lock_due_jobs(T0)

    read = Job.objects.get(pk=job.pk)
    for field in Job._meta.concrete_fields:
        assert getattr(locked, field.attname) == getattr(read, field.attname), field.name
    assert (locked._state.adding, locked._state.db) == (False, "default")
    assert isinstance(locked.next_run_at, dt.datetime) and locked.next_run_at.tzinfo is not None


def test_jobs_with_phases_of_their_own_each_advance_to_their_own_instant():
    """advance_jobs is SQL written by hand: each job gets its own pair of
    instants (to the microsecond, or none left), one UPDATE per pair."""
    phases = [dt.timedelta(microseconds=137 * n) for n in range(3)]
    jobs = [JobFactory(schedule="@every 1s", next_run_at=T0 + phase) for phase in phases]
    bystander = JobFactory(schedule="@every 1s", next_run_at=T0)

    with CaptureQueriesContext(connection) as queries:
        assert ticks.trigger_due(at(0, 0.5)) == 3 + 1
    updates = [q for q in queries if q["sql"].lstrip().upper().startswith("UPDATE")]
    # The bystander shares the first job's instants: three pairs.
    assert len(updates) == 3
    for job, phase in zip(jobs, phases, strict=True):
        job.refresh_from_db()
        assert (job.last_scheduled_at, job.next_run_at) == (T0 + phase, at(0, 1) + phase)

    jobs[0].next_run_at, jobs[0].last_scheduled_at = None, at(9)  # none left
    ticks.advance_jobs(jobs[:1])
    jobs[0].refresh_from_db()
    assert (jobs[0].last_scheduled_at, jobs[0].next_run_at) == (at(9), None)
    bystander.refresh_from_db()
    assert (bystander.last_scheduled_at, bystander.next_run_at) == (T0, at(0, 1))


def test_a_job_not_yet_due_does_not_fire():
    JobFactory(next_run_at=at(5))
    assert ticks.trigger_due(at(4, 59)) == 0
    assert not Execution.objects.exists()


def test_a_tick_with_nothing_due_only_reads():
    """No write transaction: on SQLite it would wait for the one writer."""
    JobFactory(next_run_at=at(5))
    with CaptureQueriesContext(connection) as queries:
        assert ticks.trigger_due(at(4, 59)) == 0
    assert len(queries) == 1
    assert queries[0]["sql"].lstrip().upper().startswith("SELECT")


def test_paused_and_disabled_jobs_do_not_fire():
    JobFactory(next_run_at=at(0), enabled=False)
    JobFactory(next_run_at=at(0), paused_at=at(-1))
    assert ticks.trigger_due(at(1)) == 0


def test_every_schedules_stay_anchored_on_the_last_instant_not_on_now():
    job = JobFactory(schedule="@every 1s", next_run_at=at(0))
    ticks.trigger_due(at(0, 0.4))  # 400 ms late
    job.refresh_from_db()
    assert job.next_run_at == at(0, 1)


def test_a_short_lag_within_grace_fires_every_instant_on_time():
    job = JobFactory(schedule="@every 10s", next_run_at=at(0))
    assert ticks.trigger_due(at(0, 25)) == 3
    instants = sorted(job.executions.values_list("scheduled_for", flat=True))
    assert instants == [at(0), at(0, 10), at(0, 20)]
    assert set(job.executions.values_list("trigger", flat=True)) == {Execution.SCHEDULE}
    assert not AuditEvent.objects.filter(action="job.misfire").exists()


OUTAGE_END = at(185)  # three hours and five minutes later


def test_run_once_after_a_three_hour_outage_makes_one_catch_up_then_continues():
    job = JobFactory(schedule="*/10 * * * *", next_run_at=at(0), misfire_policy=Job.RUN_ONCE)

    assert ticks.trigger_due(OUTAGE_END) == 1

    execution = job.executions.get()
    assert execution.trigger == Execution.CATCH_UP
    assert execution.scheduled_for == at(180)
    job.refresh_from_db()
    assert job.next_run_at == at(190)
    misfire = AuditEvent.objects.get(action="job.misfire")
    assert misfire.data["missed"] == 19
    assert misfire.data["dropped"] == 18
    assert counter("croniq_misfires_total", job=job.name) == 1


def test_skip_after_an_outage_drops_the_missed_instants_and_records_it():
    job = JobFactory(schedule="*/10 * * * *", next_run_at=at(0), misfire_policy=Job.SKIP)

    assert ticks.trigger_due(OUTAGE_END) == 0

    assert not job.executions.exists()
    job.refresh_from_db()
    assert job.next_run_at == at(190)
    assert AuditEvent.objects.get(action="job.misfire").data["dropped"] == 19


def test_run_all_after_an_outage_runs_each_missed_instant():
    job = JobFactory(schedule="*/10 * * * *", next_run_at=at(0), misfire_policy=Job.RUN_ALL)

    assert ticks.trigger_due(OUTAGE_END) == 19

    instants = sorted(job.executions.values_list("scheduled_for", flat=True))
    assert instants == [at(10 * i) for i in range(19)]
    assert set(job.executions.values_list("trigger", flat=True)) == {Execution.CATCH_UP}


@override_settings(CRONIQ_RUN_ALL_CAP=5)
def test_run_all_is_capped_to_the_newest_missed_instants():
    job = JobFactory(schedule="*/10 * * * *", next_run_at=at(0), misfire_policy=Job.RUN_ALL)

    assert ticks.trigger_due(OUTAGE_END) == 5

    instants = sorted(job.executions.values_list("scheduled_for", flat=True))
    assert instants == [at(10 * i) for i in range(14, 19)]
    assert AuditEvent.objects.get(action="job.misfire").data["dropped"] == 14


@override_settings(CRONIQ_MISFIRE_GRACE=0.5)
def test_an_outage_too_long_to_list_still_fires_once_and_records_it():
    job = JobFactory(schedule="@every 1s", next_run_at=at(0), misfire_policy=Job.RUN_ONCE)
    end = at(180)  # 10,800 missed instants

    assert ticks.trigger_due(end) == 1

    job.refresh_from_db()
    assert job.next_run_at > end
    assert job.next_run_at <= end + dt.timedelta(seconds=1)
    assert AuditEvent.objects.get(action="job.misfire").data["more_than_listed"] is True


def test_a_singleton_occurrence_while_one_is_active_is_recorded_as_skipped():
    job = JobFactory(schedule="*/5 * * * *", next_run_at=at(5), singleton=True)
    active = ExecutionFactory(job=job, scheduled_for=at(0), state=Execution.RUNNING)

    assert ticks.trigger_due(at(5)) == 0

    skipped = job.executions.get(scheduled_for=at(5))
    assert skipped.state == Execution.SKIPPED
    assert str(active.pk) in skipped.error
    assert job.executions.filter(state__in=Execution.ACTIVE_STATES).count() == 1
    assert counter("croniq_singleton_skips_total", job=job.name) == 1
    assert AuditEvent.objects.filter(action="execution.skipped").count() == 1


def test_a_non_singleton_job_may_overlap():
    job = JobFactory(schedule="*/5 * * * *", next_run_at=at(5))
    ExecutionFactory(job=job, scheduled_for=at(0), state=Execution.RUNNING)
    assert ticks.trigger_due(at(5)) == 1


def test_the_database_refuses_a_second_live_singleton_execution():
    from django.db import IntegrityError, transaction

    job = JobFactory(singleton=True)
    ExecutionFactory(job=job, scheduled_for=at(0))
    with pytest.raises(IntegrityError), transaction.atomic():
        ExecutionFactory(job=job, scheduled_for=at(5))


def test_the_database_refuses_a_duplicate_occurrence():
    from django.db import IntegrityError, transaction

    job = JobFactory()
    ExecutionFactory(job=job, scheduled_for=at(0), state=Execution.SUCCEEDED)
    with pytest.raises(IntegrityError), transaction.atomic():
        ExecutionFactory(job=job, scheduled_for=at(0), state=Execution.PENDING)


def running(job, claimed, lease_for=30, **fields):
    return ExecutionFactory(
        job=job,
        scheduled_for=claimed,
        state=Execution.RUNNING,
        runner=fields.pop("runner", None) or RunnerFactory(),
        lease=1,
        claimed_at=claimed,
        lease_expires_at=claimed + dt.timedelta(seconds=lease_for),
        **fields,
    )


def test_a_failed_run_is_retried_with_doubling_backoff_until_retries_run_out():
    job = JobFactory(retries=2, retry_backoff=30)
    first = running(job, at(0))

    retry = lifecycle.settle(first, Execution.FAILED, at(1), exit_code=1)
    assert (retry.attempt, retry.trigger, retry.run_after) == (2, Execution.RETRY, at(1, 30))

    retry.state, retry.lease, retry.claimed_at = Execution.RUNNING, 1, at(2)
    retry.save()
    second = lifecycle.settle(retry, Execution.TIMED_OUT, at(3))
    assert (second.attempt, second.run_after) == (3, at(4))

    second.state, second.lease, second.claimed_at = Execution.RUNNING, 1, at(5)
    second.save()
    assert lifecycle.settle(second, Execution.FAILED, at(6), exit_code=1) is None
    assert job.executions.count() == 3
    assert counter("croniq_retries_total", reason=Execution.FAILED) == 1
    assert counter("croniq_retries_total", reason=Execution.TIMED_OUT) == 1


def test_a_succeeded_run_is_not_retried():
    job = JobFactory(retries=3)
    assert lifecycle.settle(running(job, at(0)), Execution.SUCCEEDED, at(1), exit_code=0) is None
    assert counter("croniq_executions_total", state=Execution.SUCCEEDED) == 1


def test_a_stale_lease_cannot_settle_an_execution():
    job = JobFactory()
    execution = running(job, at(0))
    Execution.objects.filter(pk=execution.pk).update(lease=2)  # claimed again elsewhere

    assert lifecycle.settle(execution, Execution.SUCCEEDED, at(1), exit_code=0) is False
    execution.refresh_from_db()
    assert execution.state == Execution.RUNNING


def test_the_server_times_out_a_run_whose_runner_never_finishes():
    job = JobFactory(timeout=60, retries=0)
    execution = running(job, at(0), lease_for=3600)

    with override_settings(CRONIQ_TIMEOUT_GRACE=30):
        assert ticks.expire_timeouts(at(1, 29)) == 0
        assert ticks.expire_timeouts(at(1, 31)) == 1

    execution.refresh_from_db()
    assert execution.state == Execution.TIMED_OUT
    assert "timed out on the server" in execution.error
    assert AuditEvent.objects.filter(action="execution.timed_out").count() == 1


def test_an_expired_lease_is_reaped_and_retried_at_once_even_without_retries():
    job = JobFactory(retries=0, singleton=True)
    execution = running(job, at(0), lease_for=30)

    assert loop_steps.reap_expired_leases(at(0, 29)) == 0
    assert loop_steps.reap_expired_leases(at(0, 31)) == 1

    execution.refresh_from_db()
    assert execution.state == Execution.LOST
    assert execution.lost_reason == lifecycle.LEASE_EXPIRED
    retry = job.executions.get(attempt=2)
    assert retry.state == Execution.PENDING
    assert retry.run_after == at(0, 31)
    assert counter("croniq_executions_reaped_total", reason=lifecycle.LEASE_EXPIRED) == 1
    reaped = AuditEvent.objects.get(action="execution.reaped")
    assert reaped.data["reason"] == lifecycle.LEASE_EXPIRED
    assert reaped.data["retry"] == retry.pk


@override_settings(CRONIQ_LOST_RETRIES=2)
def test_lost_retries_stop_at_the_limit():
    job = JobFactory(retries=0)
    execution = running(job, at(0), lease_for=1)
    attempts = []
    for minute in range(1, 4):
        retry = lifecycle.release(
            Execution.objects.filter(pk=execution.pk), "lease_expired", at(minute)
        )
        attempts.append(execution.attempt)
        execution = job.executions.filter(state=Execution.PENDING).first()
        if execution is None:
            break
        Execution.objects.filter(pk=execution.pk).update(
            state=Execution.RUNNING, lease=1, claimed_at=at(minute)
        )
        execution.refresh_from_db()
        assert retry

    assert attempts == [1, 2, 3]
    assert job.executions.filter(state=Execution.LOST).count() == 3
    assert not job.executions.filter(state=Execution.PENDING).exists()
    assert AuditEvent.objects.filter(action="execution.given_up").count() == 1
    assert counter("croniq_executions_given_up_total", reason="lease_expired") == 1


def test_silent_runners_go_offline_and_long_offline_ones_are_forgotten():
    from runners.models import Runner

    with override_settings(CRONIQ_HEARTBEAT_INTERVAL=10, CRONIQ_RUNNER_RETENTION=3600):
        fresh = RunnerFactory(last_seen_at=at(0, 50))
        silent = RunnerFactory(last_seen_at=at(0, 0))
        gone = RunnerFactory(last_seen_at=at(-120), state=Runner.OFFLINE)

        assert loop_steps.update_runner_states(at(1)) == 2

    assert Runner.objects.get(pk=fresh.pk).state == Runner.ONLINE
    assert Runner.objects.get(pk=silent.pk).state == Runner.OFFLINE
    assert not Runner.objects.filter(pk=gone.pk).exists()
    assert AuditEvent.objects.filter(action="runner.offline").count() == 1
    assert AuditEvent.objects.filter(action="runner.forgotten").count() == 1


def test_housekeeping_clears_the_flapping_mark_of_a_runner_that_went_quiet():
    from runners.models import Runner
    from scheduler.firing.loop import SchedulerLoop

    quiet = RunnerFactory(flapping=True, flapping_since=at(-60), last_seen_at=at(1))

    with override_settings(CRONIQ_FLAP_WINDOW=600, CRONIQ_HEARTBEAT_INTERVAL=10):
        assert SchedulerLoop().tick(at(1))["flapping"] == 1

    assert Runner.objects.get(pk=quiet.pk).flapping is False
    assert AuditEvent.objects.filter(action="runner.flapping_cleared").count() == 1


def test_defer_runs_occurrences_blocked_by_the_calendar_once_when_it_opens():
    from tests.factories import CalendarFactory, CalendarPeriodFactory

    calendar = CalendarFactory()
    CalendarPeriodFactory(
        calendar=calendar, start_date=None, end_date=None, start_at=at(0), end_at=at(120)
    )
    job = JobFactory(schedule="*/30 * * * *", calendar=calendar, calendar_policy=Job.DEFER)
    job.reschedule(at(-10))
    job.save()
    assert job.next_run_at == at(120)  # 12:00, 12:30 ... 13:30 coalesce at the block's end

    assert ticks.trigger_due(at(120, 1)) == 1

    execution = job.executions.get()
    assert execution.scheduled_for == at(120)
    job.refresh_from_db()
    assert job.next_run_at == at(150)


def test_skip_passes_over_a_calendar_block_without_firing_inside_it():
    from tests.factories import CalendarFactory, CalendarPeriodFactory

    calendar = CalendarFactory()
    CalendarPeriodFactory(
        calendar=calendar, start_date=None, end_date=None, start_at=at(0), end_at=at(120)
    )
    job = JobFactory(schedule="*/30 * * * *", calendar=calendar)
    job.reschedule(at(-10))
    assert job.next_run_at == at(120)


@pytest.mark.parametrize(
    ("policy", "fires_at", "next_at"),
    [(Job.SKIP, None, at(35)), (Job.DEFER, at(31), at(35))],
)
def test_a_blackout_added_just_before_an_instant_is_honoured_at_fire_time(
    policy, fires_at, next_at
):
    from tests.factories import CalendarFactory, CalendarPeriodFactory

    calendar = CalendarFactory()
    job = JobFactory(schedule="*/5 * * * *", calendar=calendar, calendar_policy=policy)
    job.reschedule(at(-1))
    job.save()
    assert job.next_run_at == at(0)
    # Added a minute before the instant, without rescheduling the job.
    CalendarPeriodFactory(
        calendar=calendar, start_date=None, end_date=None, start_at=at(-1), end_at=at(31)
    )

    ticks.trigger_due(at(0, 0.01))
    assert not job.executions.exists()
    ticks.trigger_due(at(31, 0.01))

    assert list(job.executions.values_list("scheduled_for", flat=True)) == (
        [fires_at] if fires_at else []
    )
    job.refresh_from_db()
    assert job.next_run_at == next_at


def test_a_singleton_timed_out_on_the_server_is_retried_only_once_its_lease_ran_out():
    from dispatch import claims

    job = JobFactory(singleton=True, timeout=60, retries=1, retry_backoff=0, labels=[])
    execution = running(job, at(0), lease_for=80)  # the runner renewed its lease at 0:50

    with override_settings(CRONIQ_TIMEOUT_GRACE=0):
        assert ticks.expire_timeouts(at(1, 1)) == 1

    retry = job.executions.get(attempt=2)
    assert retry.run_after == execution.lease_expires_at == at(1, 20)
    event = AuditEvent.objects.get(action="execution.retry")
    assert event.data["run_after"] == at(1, 20).isoformat()
    other = RunnerFactory(labels=[])
    assert claims.claim(other, other.session, 1, at(1, 19)) == []
    assert [e.pk for e in claims.claim(other, other.session, 1, at(1, 20))] == [retry.pk]


def test_a_job_that_may_overlap_is_retried_after_its_backoff_alone():
    job = JobFactory(singleton=False, timeout=60, retries=1, retry_backoff=0)
    running(job, at(0), lease_for=80)

    with override_settings(CRONIQ_TIMEOUT_GRACE=0):
        ticks.expire_timeouts(at(1, 1))

    assert job.executions.get(attempt=2).run_after == at(1, 1)


def test_a_business_day_job_fires_on_its_day_and_advances_to_next_months():
    workdays = CalendarFactory(
        name="de-by-workdays",
        timezone="Europe/Berlin",
        weekdays=["mon", "tue", "wed", "thu", "fri"],
        holiday_country="DE",
        holiday_subdivision="BY",
    )
    # Thu 31 May 2029 is Corpus Christi: Wed 30 May is the last working day.
    may_30 = dt.datetime(2029, 5, 30, 16, 0, tzinfo=dt.UTC)  # 18:00 in Berlin
    job = JobFactory(
        schedule="@business_day -1 18:00",
        timezone="Europe/Berlin",
        calendar=workdays,
        next_run_at=may_30,
    )

    assert ticks.trigger_due(may_30 + dt.timedelta(seconds=0.01)) == 1

    assert Execution.objects.get(job=job).scheduled_for == may_30
    job.refresh_from_db()
    assert job.next_run_at == dt.datetime(2029, 6, 29, 16, 0, tzinfo=dt.UTC)  # Sat 30 June
