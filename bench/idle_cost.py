"""What an idle Croniq costs: 2,000 jobs, none due for an hour.

A real uvicorn web process, a real scheduler_loop (with its notifier
process) and one real agent long-polling, on a database holding 2,000 jobs
whose next instants are an hour or more away. After a warm-up, for
`--seconds` (default 60): the CPU time of the web process and of the loop
with its children, as a share of one core, and the queries the loop's
threads sent per minute (counted by a wrapper around its database
connection; on PostgreSQL also the transactions the database committed).
Target (issue "Fast for every job"): loop + web under 1% of one core.

    .venv/bin/python bench/idle_cost.py            # SQLite
    .venv/bin/python bench/idle_cost.py --layout serve   # one `serve` process
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_idle_bench \
        .venv/bin/python bench/idle_cost.py        # a fresh database, dropped after
"""

import argparse
import datetime as dt
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The dispatch latency bench's database set-up and helpers (bench/ is on sys.path).
from dispatch_latency import children, cpu_seconds, emit, prepare_database  # noqa: E402

JOBS = 2000
WARM_UP = 10.0
TARGET_PERCENT = 1.0

# A management command (the rest of the arguments: `scheduler_loop`, or
# `serve`), with every query of its threads counted; SIGUSR1 writes the
# count so far to the file named by its first argument.
COUNTED_COMMAND = """
import signal, sys
import django
django.setup()
from django.core.management import call_command
from django.db.backends.signals import connection_created
count = [0]
def counted(execute, sql, params, many, context):
    count[0] += 1
    return execute(sql, params, many, context)
def report(*_):
    with open(sys.argv[1], "w") as out:
        out.write(str(count[0]))
def count_on(sender, connection, **_):
    if counted not in connection.execute_wrappers:
        connection.execute_wrappers.append(counted)
connection_created.connect(count_on)
signal.signal(signal.SIGUSR1, report)
call_command(*sys.argv[2:])
"""


def transactions(url):
    """Transactions the database has committed or rolled back (PostgreSQL)."""
    if not url.startswith("postgres"):
        return None
    import psycopg

    server, name = url.rsplit("/", 1)
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        query = "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s"
        return conn.execute(query, [name]).fetchone()[0]


def loop_queries(pid, path):
    """The loop's query count so far (it writes it on SIGUSR1)."""
    path.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 5
    while not path.exists() or not path.read_text():
        if time.monotonic() > deadline:
            raise RuntimeError("the loop did not report its query count")
        time.sleep(0.01)
    return int(path.read_text())


def create_jobs(now):
    from scheduler.models import Job

    hour = now.replace(minute=0, second=0, microsecond=0)
    Job.objects.bulk_create(
        Job(
            name=f"idle-{n}",
            schedule=f"{n % 60} * * * *" if n % 2 else "@every 2h",
            command="true",
            # An hour or more away, spread over the next hour.
            next_run_at=hour + dt.timedelta(hours=2, minutes=n % 60),
        )
        for n in range(JOBS)
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--layout",
        choices=["split", "serve"],
        default="split",
        help="uvicorn and scheduler_loop apart, or one `serve` process (SQLite's).",
    )
    options = parser.parse_args()
    url = prepare_database()
    from django.db import connections
    from django.utils import timezone

    from harness.processes import Process, Server, drop_database, process_env
    from runners.models import RunnerToken

    class CountedServe(Server):
        """`manage.py serve`, its queries counted: web and loop in one process."""

        def command(self):
            counted = [sys.executable, "-c", COUNTED_COMMAND, str(count_file)]
            return [*counted, "serve", "--port", str(self.port)]

    create_jobs(timezone.now())
    secret = RunnerToken.issue(f"bench-{uuid.uuid4().hex[:8]}")[1]
    connections.close_all()
    workdir = Path(tempfile.mkdtemp(prefix="croniq-idle-bench-"))
    count_file = workdir / "loop-queries.txt"
    processes = []
    try:
        serve = options.layout == "serve"
        web = (CountedServe if serve else Server)(url, workdir / f"{options.layout}.log")
        processes.append(web)
        web.wait_ready()
        loop = web
        if not serve:
            loop = Process(
                [sys.executable, "-c", COUNTED_COMMAND, str(count_file), "scheduler_loop"],
                process_env(url, DJANGO_SETTINGS_MODULE="croniq_project.settings"),
                workdir / "loop.log",
            )
            processes.append(loop)
        agent_env = process_env("sqlite:////nonexistent", XDG_STATE_HOME=workdir / "state")
        agent = ROOT / ".venv" / "bin" / "croniq-runner"
        runner = Process(
            [str(agent), "--server", web.url, "--token", secret, "--name", "idle-1"],
            agent_env,
            workdir / "agent.log",
        )
        processes.append(runner)
        time.sleep(WARM_UP)
        queries_before = loop_queries(loop.popen.pid, count_file)
        loop_tree = [loop.popen.pid, *children(loop.popen.pid)]
        watched = {web.popen.pid, *loop_tree, runner.popen.pid}
        before = {pid: cpu_seconds(pid) for pid in watched}
        xacts_before = transactions(url)
        started = time.monotonic()
        time.sleep(options.seconds)
        elapsed = time.monotonic() - started
        used = {pid: cpu_seconds(pid) - before[pid] for pid in before}
        xacts = transactions(url)
        queries = loop_queries(loop.popen.pid, count_file) - queries_before
    finally:
        for process in reversed(processes):
            process.stop()
    # One `serve` process counts as the loop's (with its notifier's).
    web_percent = 0.0 if web is loop else 100 * used[web.popen.pid] / elapsed
    loop_percent = 100 * sum(used[pid] for pid in loop_tree) / elapsed
    emit(
        bench="idle_cost",
        backend="postgresql" if url.startswith("postgres") else "sqlite",
        layout=options.layout,
        jobs=JOBS,
        seconds=round(elapsed, 1),
        web_cpu_percent=round(web_percent, 3),
        loop_cpu_percent=round(loop_percent, 3),
        loop_processes=len(loop_tree),
        total_cpu_percent=round(web_percent + loop_percent, 3),
        # On the runner's machine, not the server's: not in the target.
        agent_cpu_percent=round(100 * used[runner.popen.pid] / elapsed, 3),
        loop_queries_per_minute=round(queries * 60 / elapsed),
        database_transactions_per_minute=(
            round((xacts - xacts_before) * 60 / elapsed) if xacts is not None else None
        ),
        load_average=os.getloadavg()[0],
        target_percent=TARGET_PERCENT,
        met=web_percent + loop_percent < TARGET_PERCENT,
    )
    drop_database(url)


if __name__ == "__main__":
    main()
