"""Invariant 1 under real concurrency: racing trigger ticks on PostgreSQL."""

import datetime as dt
import threading

import pytest
from django.db import connection, connections

from scheduler.firing import ticks
from scheduler.models import Execution, Job

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
JOBS = 40
INSTANTS = 8
RACERS = 4


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("SKIP LOCKED races need PostgreSQL; SQLite serialises writers")


def race(now):
    barrier = threading.Barrier(RACERS)
    errors = []

    def tick():
        try:
            barrier.wait()
            ticks.trigger_due(now)
        except Exception as e:  # surfaced below: a racer must never fail
            errors.append(e)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=tick) for _ in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_racing_ticks_create_every_instant_exactly_once(postgres_only):
    Job.objects.bulk_create(
        Job(name=f"race-{i}", schedule="@every 1s", command="true", next_run_at=T0)
        for i in range(JOBS)
    )
    for second in range(INSTANTS):
        race(T0 + dt.timedelta(seconds=second, milliseconds=5))

    executions = list(Execution.objects.values_list("job_id", "scheduled_for"))
    assert len(executions) == len(set(executions)), "an instant fired twice"
    assert len(executions) == JOBS * INSTANTS, "an instant was missed"
    expected = {T0 + dt.timedelta(seconds=s) for s in range(INSTANTS)}
    for job in Job.objects.all():
        assert set(job.executions.values_list("scheduled_for", flat=True)) == expected
