"""Retention at scale: `manage.py prune` deletes 1,000,000 expired executions
with their logs while the scheduler loop ticks every second beside it.

    .venv/bin/python bench/prune.py                     # SQLite (temporary file)
    DATABASE_URL=postgres://postgres@127.0.0.1/postgres .venv/bin/python bench/prune.py
      (a fresh database croniq_bench_<random> is created and dropped on PostgreSQL)
    .venv/bin/python bench/prune.py --executions 100000 # a quicker run

Seeded with raw INSERT ... SELECT (a recursive CTE on SQLite, generate_series
on PostgreSQL): JOBS jobs, each with expired runs (finished 91 to ~140 days
ago, one log chunk each) and one recent run, plus TICKING `@every 1s` jobs
that the loop fires all along (each tick writes).

The loop runs as `scheduler_loop` runs it (`SchedulerLoop.run_forever`):
one thread ticks at each due instant (once a second: the ticking jobs are
due every second), firing and reaping; another runs the housekeeping steps
(detectors, the loop's own bounded prune step, ...) when they are due.
`manage.py prune` runs in another process. Prints the tick times while the
prune ran (p50, p99, max; target p99 <= 50 ms), the housekeeping passes'
times, and the prune's duration and rate, as JSON lines.

    --housekeeping-in-tick   every step in the tick, on one thread: how the
                             loop ran before its housekeeping moved to a
                             thread of its own (figures up to 2026-12-01)

The ticking jobs have no runner: their runs stay pending, so the job.missed
detector reports them all along (at most its batch a pass).
"""

import argparse
import atexit
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tick import setup_database  # noqa: E402  (bench/ is not a package)

ROOT = Path(__file__).resolve().parents[1]
JOBS = 1_000
TICKING = 20
TARGET_P99_MS = 50
# Ticks before the prune starts: on a shared machine the tick's own p99
# without any pruning is the figure to hold the one during the prune against.
BASELINE_SECONDS = 20
DAY = 86_400


def emit(**fields):
    print(json.dumps(fields), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=1_000_000)
    parser.add_argument("--housekeeping-in-tick", action="store_true")
    args = parser.parse_args(argv)
    backend, cleanup = setup_database()
    if backend == "sqlite":  # a temporary file of a few hundred MB: remove it
        folder = Path(os.environ["DATABASE_URL"].removeprefix("sqlite:///")).parent
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ.setdefault("SECRET_KEY", "bench")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    import logging

    import django

    django.setup()
    logging.disable(logging.WARNING)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        bench_prune(backend, args.executions, apart=not args.housekeeping_in_tick)
    finally:
        cleanup()


def bench_prune(backend, executions, apart=True):
    from django.db import connections

    from scheduler.models import LogChunk

    now = datetime.now(UTC)
    seconds = seed(now, executions)
    emit(bench="prune", step="seed", backend=backend, executions=executions, seconds=seconds)
    connections.close_all()

    ticker = Ticker(apart)
    ticker.start()
    time.sleep(BASELINE_SECONDS)  # ticks before the prune: the baseline
    baseline = ticker.take()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "prune"],
        cwd=ROOT,
        env={**os.environ, "LOG_LEVEL": "WARNING"},
        capture_output=True,
        text=True,
        check=True,
    )
    took = time.perf_counter() - started
    housekeeping, cpu = list(ticker.housekeeping), list(ticker.cpu)
    passes, slowest_pass = list(ticker.passes), ticker.slowest_pass
    slowest = ticker.slowest
    unit_p99 = {
        name: round(percentile(times, 0.99), 1) for name, times in ticker.unit_times.items()
    }
    during = ticker.take()
    ticker.stop()
    by_command = int(re.search(r"pruned (\d+) execution", done.stdout).group(1))
    # The loop's own prune step shares the work: count what is left instead.
    left = expired_left(executions)
    p99 = percentile(during, 0.99)
    emit(
        bench="prune",
        step="prune_while_ticking",
        backend=backend,
        loop="tick and housekeeping on their own threads" if apart else "one thread",
        executions=executions - left,
        by_command=by_command,
        log_chunks_left=LogChunk.objects.filter(execution__job__name__startswith="old-").count(),
        prune_seconds=round(took, 1),
        executions_per_second=round((executions - left) / took),
        ticks=len(during),
        tick_p50_ms=round(statistics.median(during), 2),
        tick_p99_ms=round(p99, 2),
        tick_max_ms=round(max(during), 2),
        # The tick thread's own CPU time: on a loaded machine the wall time
        # above is mostly waiting for a core.
        tick_cpu_p99_ms=round(percentile(cpu, 0.99), 2),
        # Ticks that ran the loop's own prune step (one thread only).
        housekeeping_tick_max_ms=round(max(housekeeping, default=0), 2),
        slowest_tick_units_ms=slowest[1],
        # The housekeeping thread's passes (none on one thread).
        housekeeping_passes=len(passes),
        housekeeping_pass_p99_ms=round(percentile(passes, 0.99), 2) if passes else None,
        slowest_pass_units_ms=slowest_pass[1],
        # Each unit's own p99 over the ticks that ran it.
        unit_p99_ms=unit_p99,
        baseline_tick_p50_ms=round(statistics.median(baseline), 2),
        baseline_tick_p99_ms=round(percentile(baseline, 0.99), 2),
        baseline_tick_max_ms=round(max(baseline), 2),
        tick_errors=ticker.errors,
        load_average=round(os.getloadavg()[0], 2),
        target_ms=TARGET_P99_MS,
        met=p99 <= TARGET_P99_MS and left == 0 and not ticker.errors,
    )


def expired_left(executions):
    """Expired executions still there (each old job keeps its latest run)."""
    from scheduler.models import Execution

    return Execution.objects.filter(job__name__startswith="old-").count() - JOBS


def percentile(samples, q):
    ordered = sorted(samples)
    return ordered[max(0, int(len(ordered) * q + 0.5) - 1)]


class Ticker(threading.Thread):
    """The scheduler loop as `run_forever` runs it: this thread ticks once a
    second (at the earliest due instant), another runs the housekeeping
    steps (`housekeep`); or, with `apart` False, every step in the tick.
    Collects each tick's duration, and each unit's."""

    def __init__(self, apart=True):
        super().__init__(daemon=True)
        self.apart = apart
        self.samples = []
        self.cpu = []  # this thread's CPU time per tick (SQLite's work included)
        self.housekeeping = []
        self.slowest = (0.0, {})  # (ms, {unit: ms}) of the slowest tick
        self.passes = []  # the housekeeping thread's passes, ms
        self.slowest_pass = (0.0, {})
        self.unit_times = {}  # {unit: [ms, ...]}
        self.errors = 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.timings = threading.local()  # {unit: ms} of the thread's current run

    def run(self):
        from django.db import connection
        from django.utils import timezone

        from scheduler.firing.long_lived import switch_threads_often
        from scheduler.firing.loop import SchedulerLoop

        loop = SchedulerLoop()
        units = loop.units
        loop.units = lambda now, steps=None: [
            (name, self.timed(name, unit)) for name, unit in units(now, steps)
        ]
        # As run_forever: the tick takes SQLite's write lock ahead of other
        # writers, and threads switch every 0.5 ms.
        connection.eager_write_lock = True
        switch_threads_often()
        housekeeper = None
        while not self.stopping.is_set():
            self.timings.units = {}
            started = time.perf_counter()
            cpu = time.thread_time()
            before = loop.last_run.get("pruned")
            try:
                loop.tick(timezone.now())
            except Exception:
                self.errors += 1
            took = time.perf_counter() - started
            with self.lock:
                self.samples.append(took * 1000)
                self.cpu.append((time.thread_time() - cpu) * 1000)
                if loop.last_run.get("pruned") != before:  # this tick pruned too
                    self.housekeeping.append(took * 1000)
                self.record_units()
                if took * 1000 > self.slowest[0]:
                    self.slowest = (round(took * 1000, 1), self.timings.units)
            if housekeeper is None and self.apart:
                # As run_forever: the first tick ran every step; from now on
                # the housekeeping steps run on a thread of their own.
                loop.housekeeping_apart = True
                housekeeper = threading.Thread(target=self.housekeep, args=(loop,), daemon=True)
                housekeeper.start()
            # As the loop does: the next tick at the earliest due instant,
            # a second after this one's start at the latest.
            self.stopping.wait(self.until_next(loop, started + 1.0))
        if housekeeper is not None:
            housekeeper.join()
        connection.close()

    def housekeep(self, loop):
        """SchedulerLoop.housekeep_forever, each pass timed."""
        from django.db import connection
        from django.utils import timezone

        while not self.stopping.is_set():
            self.timings.units = {}
            now = timezone.now()
            started = time.perf_counter()
            try:
                loop.run_units(now, loop.units(now, loop.housekeeping))
            except Exception:
                self.errors += 1
            took = time.perf_counter() - started
            if self.timings.units:  # a pass that ran a step
                with self.lock:
                    self.passes.append(took * 1000)
                    self.record_units()
                    if took * 1000 > self.slowest_pass[0]:
                        self.slowest_pass = (round(took * 1000, 1), self.timings.units)
            self.stopping.wait(loop.housekeeping_due_in(timezone.now()))
        connection.close()

    def record_units(self):
        for name, ms in self.timings.units.items():
            self.unit_times.setdefault(name, []).append(ms)

    def until_next(self, loop, latest):
        from django.utils import timezone

        from scheduler.firing import ticks

        seconds = latest - time.perf_counter()
        now = timezone.now()
        due = ticks.earliest_due(now, loop.fire_lead)
        if due is not None:
            seconds = min(seconds, (due - now).total_seconds())
        return max(0.0, seconds)

    def timed(self, name, unit):
        def run(now):
            started = time.perf_counter()
            try:
                return unit(now)
            finally:
                self.timings.units[name] = round((time.perf_counter() - started) * 1000, 1)

        return run

    def take(self):
        with self.lock:
            samples, self.samples = self.samples, []
            self.housekeeping, self.cpu = [], []
            self.slowest = (0.0, {})
            self.passes, self.slowest_pass = [], (0.0, {})
            self.unit_times = {}
        return samples

    def stop(self):
        self.stopping.set()
        self.join()


# Seeding


def seed(now, executions):
    from django.db import connection

    from scheduler.models import Job

    started = time.perf_counter()
    Job.objects.bulk_create(
        Job(name=f"old-{i:04}", schedule="0 * * * *", command="true", next_run_at=None)
        for i in range(JOBS)
    )
    Job.objects.bulk_create(
        Job(name=f"tick-{i:02}", schedule="@every 1s", command="true", next_run_at=now)
        for i in range(TICKING)
    )
    stamp = int(now.timestamp())
    for sql in (EXPIRED_SQL, RECENT_SQL, LOGS_SQL, "ANALYZE"):
        sql = for_backend(sql, connection.vendor)
        sql = sql.replace("@NOW", str(stamp)).replace("@LAST", str(executions - 1))
        sql = sql.replace("@JOBS", str(JOBS))
        with connection.cursor() as cursor:
            cursor.execute(sql)
    return round(time.perf_counter() - started, 1)


# Row i belongs to old job n = i % JOBS and finished 91 days and i / JOBS
# hours ago (plus a few seconds), a success with some failures.
EXPIRED_SQL = f"""
INSERT INTO scheduler_execution (job_id, scheduled_for, attempt, "trigger", state, singleton,
  run_after, session, lease, created_at, claimed_at, finished_at, exit_code, error,
  lost_reason, log_size, log_truncated)
SELECT job_id, @TS[t], 1, 'schedule', CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'succeeded' END,
  FALSE, @TS[t], '', 1, @TS[t], @TS[t + 1], @TS[t + 5],
  CASE WHEN i % 10 = 0 THEN 1 ELSE 0 END, '', '', 20, FALSE
FROM (
  SELECT i, job_id, @NOW - 91 * {DAY} - (i / @JOBS) * 3600 - 5 AS t
  FROM (SELECT i, i % @JOBS AS n FROM @SEQ) AS s
  JOIN (SELECT id AS job_id, ROW_NUMBER() OVER (ORDER BY id) - 1 AS rn
        FROM scheduler_job WHERE name LIKE 'old-%') AS j ON j.rn = s.n
) AS r
"""

# Every old job's latest run, a day ago: kept (the job's last result).
RECENT_SQL = f"""
INSERT INTO scheduler_execution (job_id, scheduled_for, attempt, "trigger", state, singleton,
  run_after, session, lease, created_at, claimed_at, finished_at, exit_code, error,
  lost_reason, log_size, log_truncated)
SELECT id, @TS[@NOW - {DAY}], 1, 'schedule', 'succeeded', FALSE, @TS[@NOW - {DAY}], '', 1,
  @TS[@NOW - {DAY}], @TS[@NOW - {DAY}], @TS[@NOW - {DAY} + 5], 0, '', '', 0, FALSE
FROM scheduler_job WHERE name LIKE 'old-%'
"""

LOGS_SQL = """
INSERT INTO scheduler_logchunk (execution_id, seq, data, created_at)
SELECT id, 0, 'step 1 of 1: done', claimed_at FROM scheduler_execution
"""


def for_backend(sql, vendor):
    """Number rows with generate_series on PostgreSQL and a recursive CTE on
    SQLite; SQLite stores datetimes as the text datetime() writes."""
    if vendor == "postgresql":
        sql = sql.replace("@SEQ", "generate_series(0::bigint, @LAST) AS g(i)")
        return re.sub(r"@TS\[(.*?)\]", r"to_timestamp(\1)", sql)
    sql = re.sub(r"@TS\[(.*?)\]", r"datetime(\1, 'unixepoch')", sql)
    if "@SEQ" in sql:
        sql = sql.replace("@SEQ", "seq")
        sql = (
            "WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < @LAST)"
            + sql
        )
    return sql


if __name__ == "__main__":
    main()
