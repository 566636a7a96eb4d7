"""scheduler 0020 on a database holding jobs: each gets no further schedule,
no one-shot instant, no bound and no run limit, and fires as it did."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from scheduler.firing import ticks
from scheduler.models import Execution, Job
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0019_job_stdin_run_as_run_on_register")]
AFTER = [("scheduler", "0020_job_schedules_at_bounds_max_runs")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_stored_jobs_upgrade_to_no_timing_and_fire_as_before():
    old = migrate(BEFORE)
    jobs = old.get_model("scheduler", "Job").objects
    jobs.create(name="cron", schedule="30 2 * * *", timezone="Europe/Berlin", command="true")
    jobs.create(name="every", schedule="@every 7m", command="true", next_run_at=T0)
    jobs.create(name="register", schedule="", run_on_register=True, command="true")
    try:
        migrate(AFTER)
        migrate(everything())
        for job in Job.objects.all():
            timing = (job.schedules, job.at, job.not_before, job.not_after, job.max_runs)
            assert timing == ([], [], None, None, None), job.name
            assert (job.scheduled_runs, job.completed, job.timing) == (0, False, None)
            job.full_clean()  # still valid as it is
        cron, every = Job.objects.get(name="cron"), Job.objects.get(name="every")
        assert [t.isoformat() for t in cron.upcoming(T0, 2)] == [
            "2026-06-02T00:30:00+00:00",
            "2026-06-03T00:30:00+00:00",
        ]
        # An @every job stays on the grid of its next run.
        assert every.upcoming(T0 + dt.timedelta(minutes=10), 2) == [
            T0 + dt.timedelta(minutes=14),
            T0 + dt.timedelta(minutes=21),
        ]
        ticks.trigger_due(T0)
        every.refresh_from_db()
        assert Execution.objects.filter(job=every, scheduled_for=T0).exists()
        assert (every.next_run_at, every.scheduled_runs) == (T0 + dt.timedelta(minutes=7), 0)
    finally:
        migrate(everything())
