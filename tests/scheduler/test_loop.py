"""One iteration of the scheduler loop, at fixed instants."""

import datetime as dt

import pytest

from scheduler.loop import SchedulerLoop
from scheduler.models import Execution
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

# run_once() closes obsolete connections, as the loop does: that needs real
# transactions, not the test-wrapping one.
pytestmark = pytest.mark.django_db(transaction=True)

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def test_one_tick_fires_due_jobs_and_reaps_expired_leases():
    due = JobFactory(schedule="*/5 * * * *", next_run_at=T0)
    JobFactory(schedule="*/5 * * * *", next_run_at=T0 + dt.timedelta(minutes=5))
    orphan = ExecutionFactory(
        job=JobFactory(next_run_at=None),
        state=Execution.RUNNING,
        runner=RunnerFactory(),
        lease=1,
        claimed_at=T0 - dt.timedelta(minutes=1),
        lease_expires_at=T0 - dt.timedelta(seconds=1),
    )

    done = SchedulerLoop(clock=lambda: T0).run_once()

    assert done == {"fired": 1, "reaped": 1}
    assert due.executions.get().state == Execution.PENDING
    orphan.refresh_from_db()
    assert orphan.state == Execution.LOST


def test_a_tick_with_nothing_to_do_reports_nothing():
    JobFactory(next_run_at=T0 + dt.timedelta(hours=1))
    assert SchedulerLoop(clock=lambda: T0).run_once() == {}


def test_the_loop_sleeps_no_longer_than_until_the_earliest_due_job(monkeypatch):
    JobFactory(next_run_at=T0 + dt.timedelta(milliseconds=300))
    loop = SchedulerLoop(interval=5.0, clock=lambda: T0)
    waits = []
    monkeypatch.setattr(loop.stopping, "wait", lambda seconds: waits.append(seconds) or True)

    loop.sleep_until_due()

    assert 0 < waits[0] <= 0.3


def test_stop_ends_run_forever_after_the_current_tick():
    loop = SchedulerLoop(interval=0.01, clock=lambda: T0)
    ticks = []
    original = loop.run_once

    def run_once():
        ticks.append(1)
        loop.stop()
        return original()

    loop.run_once = run_once
    loop.run_forever()
    assert ticks == [1]
