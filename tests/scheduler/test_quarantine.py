"""A job that cannot be fired is quarantined; every other job keeps firing."""

import datetime as dt
import logging

import pytest

from audit.models import AuditEvent, Counter
from croniq_project.collector import families
from scheduler.firing import ticks
from scheduler.firing.loop import SchedulerLoop
from scheduler.models import Execution, Job
from scheduler.runs import operations
from tests.factories import ExecutionFactory, JobFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def at(minutes=0, seconds=0):
    return T0 + dt.timedelta(minutes=minutes, seconds=seconds)


def counter(name, **labels):
    from audit.recording import labels_key

    return Counter.objects.value_of(name, labels_key(labels))


def stale_singleton():
    """A singleton job whose next_run_at points at an instant that already
    has its execution, still live (what a lost update used to leave)."""
    job = JobFactory(singleton=True, next_run_at=at(0))
    ExecutionFactory(job=job, scheduled_for=at(0), state=Execution.RUNNING, lease=1)
    return job


def test_a_stale_singleton_is_quarantined_and_the_other_jobs_fire():
    stuck = stale_singleton()
    others = [JobFactory(next_run_at=at(0)) for _ in range(3)]

    assert ticks.trigger_due(at(0, 1)) == 3

    for job in others:
        assert job.executions.get().scheduled_for == at(0)
    stuck.refresh_from_db()
    assert "IntegrityError" in stuck.error
    assert stuck.error_at == at(0, 1)
    assert stuck.next_run_at is None
    event = AuditEvent.objects.get(action="job.error")
    assert event.target_id == str(stuck.pk)
    assert event.data["next_run_at"] == at(0).isoformat()
    assert counter("croniq_job_errors_total", job=stuck.name) == 1
    assert stuck.executions.count() == 1  # nothing half-written for it


def test_a_quarantined_job_stays_out_of_the_schedule_at_no_cost_to_the_others():
    stuck = stale_singleton()
    other = JobFactory(next_run_at=at(0))
    ticks.trigger_due(at(0, 1))

    assert ticks.trigger_due(at(5, 1)) == 1
    assert other.executions.count() == 2
    assert AuditEvent.objects.filter(action="job.error").count() == 1
    assert ticks.earliest_due(at(5, 1)) == at(10)
    assert Job.objects.get(pk=stuck.pk).error


def test_a_job_whose_schedule_cannot_be_evaluated_is_quarantined_with_the_reason(caplog):
    broken = JobFactory(next_run_at=at(0))
    Job.objects.filter(pk=broken.pk).update(schedule="not a schedule")
    other = JobFactory(next_run_at=at(0))

    with caplog.at_level(logging.ERROR, logger="croniq.scheduler"):
        assert ticks.trigger_due(at(0, 1)) == 1

    assert other.executions.count() == 1
    broken.refresh_from_db()
    assert broken.error.startswith("ScheduleError")
    assert broken.next_run_at is None
    assert any(r.exc_info for r in caplog.records), "the error is logged with its traceback"


def test_the_error_counter_is_exported_on_metrics():
    stuck = stale_singleton()
    ticks.trigger_due(at(0, 1))

    family = next(f for f in families(at(0, 2)) if f.name == "croniq_job_errors")
    assert [(s.labels, s.value) for s in family.samples if s.name.endswith("_total")] == [
        ({"job": stuck.name}, 1)
    ]


def quarantined_gauge(now):
    family = next(f for f in families(now) if f.name == "croniq_jobs_quarantined")
    return [sample.value for sample in family.samples]


def test_the_quarantined_gauge_stays_up_until_the_job_is_cleared():
    stuck = stale_singleton()
    assert quarantined_gauge(at(0)) == [0]
    ticks.trigger_due(at(0, 1))

    assert quarantined_gauge(at(30)) == [1]  # a state: still up half an hour later
    stuck.executions.update(state=Execution.SUCCEEDED)
    operations.resume(Job.objects.filter(pk=stuck.pk), at(31), ("user", "ops"))
    assert quarantined_gauge(at(31)) == [0]


def test_resuming_a_quarantined_job_clears_the_error_and_it_fires_again():
    stuck = stale_singleton()
    ticks.trigger_due(at(0, 1))
    stuck.executions.update(state=Execution.SUCCEEDED)

    assert operations.resume(Job.objects.filter(pk=stuck.pk), at(2), ("user", "ops")) == 1

    stuck.refresh_from_db()
    assert (stuck.error, stuck.error_at, stuck.next_run_at) == ("", None, at(5))
    event = AuditEvent.objects.get(action="job.resumed")
    assert "IntegrityError" in event.data["cleared_error"]
    assert ticks.trigger_due(at(5, 1)) == 1


@pytest.mark.django_db(transaction=True)
def test_one_loop_tick_fires_the_healthy_jobs_next_to_a_stale_singleton():
    stale_singleton()
    healthy = JobFactory(next_run_at=at(0))

    done = SchedulerLoop(clock=lambda: at(0, 1)).run_once()

    assert done == {"fired": 1}
    assert healthy.executions.count() == 1


class FailingUnitLoop(SchedulerLoop):
    """The loop with one more unit, which raises what a bug would."""

    def __init__(self, stop_after, **kwargs):
        super().__init__(**kwargs)
        self.failures = 0
        self.stop_after = stop_after

    def units(self, now, steps=None):
        if steps is not None:  # the housekeeping thread's
            return super().units(now, steps)
        return [("broken", self.broken), *super().units(now)]

    def broken(self, now):
        self.failures += 1
        if self.failures >= self.stop_after:
            self.stop()
        raise ValueError("a bug in one unit")


@pytest.mark.django_db(transaction=True)
def test_an_error_that_is_not_the_database_is_logged_and_the_other_units_still_run(caplog):
    job = JobFactory(next_run_at=at(0))
    loop = FailingUnitLoop(stop_after=99, clock=lambda: at(0, 1))

    with caplog.at_level(logging.ERROR, logger="croniq.scheduler"):
        assert loop.run_once() == {"fired": 1}

    assert job.executions.count() == 1
    failed = [r for r in caplog.records if "broken" in r.getMessage()]
    assert failed and failed[0].exc_info[0] is ValueError


@pytest.mark.django_db(transaction=True)
def test_the_loop_carries_on_through_errors_until_it_is_stopped():
    loop = FailingUnitLoop(stop_after=3, interval=0.01, clock=lambda: at(0, 1))

    loop.run_forever()

    assert loop.failures == 3


def test_the_dashboard_shows_a_quarantined_job_and_why(client, django_user_model):
    from django.contrib.auth.models import Group
    from django.urls import reverse

    user = django_user_model.objects.create_user("operator", password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name="Croniq viewers"))
    client.force_login(user)
    stuck = stale_singleton()
    healthy = JobFactory(next_run_at=at(0))
    ticks.trigger_due(at(0, 1))

    overview = client.get(reverse("dashboard:overview")).content.decode()
    rows = {row.split('"')[0]: row for row in overview.split('data-job="')[1:]}
    assert "data-job-error" in rows[stuck.name].split("</tr>")[0]
    assert "data-job-error" not in rows[healthy.name].split("</tr>")[0]

    page = client.get(reverse("dashboard:job", args=[stuck.name])).content.decode()
    reason = page.split("data-job-error-reason>")[1].split("</p>")[0]
    assert "IntegrityError" in reason
    assert "in error" in page
