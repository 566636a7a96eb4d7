"""Scheduler tick benchmarks (JSON lines). DATABASE_URL picks the backend.

.venv/bin/python bench/tick.py                      # SQLite (temporary file)
DATABASE_URL=postgres://postgres@127.0.0.1/postgres .venv/bin/python bench/tick.py
  (a fresh database croniq_bench_tick is created and dropped on PostgreSQL)
"""

import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def setup_database():
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        import psycopg

        name = f"croniq_bench_{uuid.uuid4().hex[:8]}"
        admin = url.rsplit("/", 1)[0]
        with psycopg.connect(admin.replace("postgres://", "postgresql://") + "/postgres",
                             autocommit=True) as conn:  # fmt: skip
            conn.execute(f'CREATE DATABASE "{name}"')
        os.environ["DATABASE_URL"] = f"{admin}/{name}"
        return "postgresql", lambda: drop(admin, name)
    path = Path(tempfile.mkdtemp()) / "bench.sqlite3"
    os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    return "sqlite", lambda: None


def drop(admin, name):
    import psycopg
    from django.db import connections

    connections.close_all()
    with psycopg.connect(admin.replace("postgres://", "postgresql://") + "/postgres",
                         autocommit=True) as conn:  # fmt: skip
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def emit(**fields):
    print(json.dumps(fields), flush=True)


def main():
    backend, cleanup = setup_database()
    os.environ.setdefault("SECRET_KEY", "bench")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    import logging

    import django

    django.setup()
    logging.disable(logging.WARNING)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        bench_idle_tick(backend)
        bench_burst(backend)
        bench_firing_lag(backend)
    finally:
        cleanup()


def bench_idle_tick(backend, jobs=100_000):
    from scheduler.firing import ticks
    from scheduler.models import Job

    now = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
    later = now + dt.timedelta(days=1)
    Job.objects.bulk_create(
        (
            Job(name=f"idle-{i}", schedule="0 3 * * *", command="true", next_run_at=later)
            for i in range(jobs)
        ),
        batch_size=5000,
    )
    analyze()
    samples = []
    for _ in range(50):
        start = time.perf_counter()
        created = ticks.trigger_due(now)
        samples.append((time.perf_counter() - start) * 1000)
        assert created == 0
    emit(
        bench="tick_idle",
        backend=backend,
        jobs=jobs,
        median_ms=round(statistics.median(samples), 3),
        p99_ms=round(sorted(samples)[int(len(samples) * 0.99) - 1], 3),
        target_ms=10,
        met=statistics.median(samples) <= 10,
    )
    Job.objects.all().delete()


def analyze():
    """Fresh planner statistics, as autovacuum would have after a bulk load."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def bench_burst(backend, jobs=1000):
    from scheduler.firing import ticks
    from scheduler.models import Execution, Job

    now = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
    Job.objects.bulk_create(
        Job(name=f"burst-{i}", schedule="0 12 * * *", command="true", next_run_at=now)
        for i in range(jobs)
    )
    start = time.perf_counter()
    created = 0
    while created < jobs:
        created += ticks.trigger_due(now + dt.timedelta(seconds=1))
    elapsed = time.perf_counter() - start
    assert Execution.objects.count() == jobs
    emit(
        bench="tick_burst",
        backend=backend,
        jobs=jobs,
        seconds=round(elapsed, 3),
        executions_per_second=round(jobs / elapsed),
        target_per_second=1000,
        met=jobs / elapsed >= 1000,
    )


def bench_firing_lag(backend, jobs=20, seconds=10):
    """A real scheduler_loop process fires @every 1s jobs; lag is the
    execution's creation instant minus its scheduled instant.

    The lag is measured on singleton jobs that each hold a running
    execution: they are held back to their instant, where the loop records
    the occurrence as skipped (the path of any decision taken at the
    instant). The other jobs are fired `ticks.FIRE_LEAD` ahead: for those
    the figure is how far ahead of its instant each execution was ready.
    """
    import subprocess

    from django.utils import timezone

    from scheduler.models import Execution, Job

    Job.objects.all().delete()
    now = timezone.now()
    Job.objects.bulk_create(
        Job(
            name=f"{kind}-{i}",
            schedule="@every 1s",
            command="true",
            singleton=kind == "lag",
            next_run_at=now + dt.timedelta(seconds=1),
        )
        for i in range(jobs)
        for kind in ("lag", "ahead")
    )
    # The lag jobs' runs never end: their lease outlives the bench.
    Execution.objects.bulk_create(
        Execution(
            job=job, scheduled_for=now, run_after=now, created_at=now, claimed_at=now,
            state=Execution.RUNNING, singleton=True,
            lease_expires_at=now + dt.timedelta(days=1),
        )
        for job in Job.objects.filter(name__startswith="lag-")
    )  # fmt: skip
    loop = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "scheduler_loop"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(seconds)
    loop.terminate()
    loop.wait(10)
    # Instants from the loop's start-up second are left out: they measure
    # how long Django takes to import, not how late the loop fires.
    warm = now + dt.timedelta(seconds=3)

    def delays(prefix):
        return sorted(
            (e.created_at - e.scheduled_for).total_seconds() * 1000
            for e in Execution.objects.filter(job__name__startswith=prefix, scheduled_for__gte=warm)
        )

    lags = delays("lag-")
    ahead = [-d for d in delays("ahead-")]
    p99 = lags[max(0, int(len(lags) * 0.99) - 1)]
    emit(
        bench="firing_lag",
        backend=backend,
        jobs=jobs,
        executions=len(lags),
        p50_ms=round(statistics.median(lags), 2),
        p99_ms=round(p99, 2),
        max_ms=round(lags[-1], 2),
        # Plain jobs: how long before its instant the execution existed
        # (min / median), against a lead of ticks.FIRE_LEAD.
        ready_ahead_ms=[round(min(ahead), 2), round(statistics.median(ahead), 2)],
        target_p99_ms=20,
        met=p99 <= 20,
    )


if __name__ == "__main__":
    main()
