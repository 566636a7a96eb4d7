"""Notification benchmarks (issue 16, "Figures"): JSON lines.

- latency: a failing finish (`lifecycle.settle` with exit code 1, committed
  in this process as a web process would) to the webhook receiver's request,
  delivered by a real `scheduler_loop` process (its notifier wakes by
  LISTEN/NOTIFY on PostgreSQL, by its 50 ms poll on SQLite): p50/p99 over
  200 failures. Target p50 <= 100 ms, p99 <= 1 s.
- burst: 1,000 notifications due at once, a receiver answering in 10 ms:
  time until all are delivered, and the scheduler loop's tick p99 meanwhile
  (the loop runs in a process of its own beside its notifier, with 5
  jobs firing every second). Target: within 10 s, tick p99 <= 20 ms.
- storm: 500 jobs of one runner pool failing within one minute, routed to
  two channels (a signed webhook and a chat webhook): notifications per
  channel. Target <= 5 per channel.

latency and storm need routing (notifications.routing); without it they
print {"skipped": ...}.

    .venv/bin/python bench/notifications.py                 # SQLite, a temporary file
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_bench_notifications \\
        .venv/bin/python bench/notifications.py             # a fresh database, dropped after

Options: --only latency,burst,storm  --failures N (latency, default 200)
         --steps (burst: a line per window, before and during the burst, with
         each step's time, the loop's waits for SQLite's write lock "begin",
         its commits and garbage collections "gc0".."gc2")
"""

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dispatch_latency import children, cpu_seconds  # noqa: E402 (bench/ is on sys.path)

LATENCY_FAILURES = 200
BURST = 1000
BURST_ANSWER = 0.010  # seconds the burst's receiver takes to answer
BURST_JOBS = 5  # jobs @every 1s firing during the burst
BURST_WARMUP = 3.0  # seconds: the loop's first ticks start the notifier
BURST_BASELINE = 7.0  # seconds of ticks before the burst (the burst takes about as long)
STORM_JOBS = 500
STORM_SECONDS = 40.0  # the failures are spread over this (within one minute)
STORM_THREADS = 4  # finishes settled at once, as several web threads would
# CRONIQ_INCIDENT_WINDOW of the storm (default 300 s): one minute, so that
# its incident closes (and is delivered) within the run.
STORM_WINDOW = 60
SECRET_VARIABLE = "CRONIQ_SECRET_BENCH_HOOK"
SECRET = "bench-hook-secret"


def emit(**fields):
    print(json.dumps(fields), flush=True)


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return None
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
    return ordered[index]


def ms(seconds):
    return None if seconds is None else round(seconds * 1000, 2)


# -- database ------------------------------------------------------------------


def prepare_database():
    url = os.environ.get("DATABASE_URL")
    if not url:
        url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'notifications-bench.sqlite3'}"
    elif url.startswith("postgres"):
        server, name = url.rsplit("/", 1)
        url = f"{server}/{name}_{uuid.uuid4().hex[:6]}"
        import psycopg

        with psycopg.connect(server + "/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{url.rsplit("/", 1)[1]}"')
    os.environ["DATABASE_URL"] = url
    os.environ[SECRET_VARIABLE] = SECRET
    os.environ.setdefault("SECRET_KEY", "croniq-bench-key")
    # The bench's receivers listen on 127.0.0.1, which channels refuse unless allowed.
    os.environ.setdefault("CRONIQ_NOTIFY_ALLOW_NETS", "127.0.0.0/8")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return url


def drop_database(url):
    if url.startswith("postgres"):
        from django.db import connections

        connections.close_all()
        from harness.processes import drop_database as drop

        drop(url)


def backend(url):
    return "postgresql" if url.startswith("postgres") else "sqlite"


def routing_present():
    return importlib.util.find_spec("notifications.routing") is not None


def start_loop(url, workdir, name, **env):
    from harness.processes import start_loop as start
    from harness.processes import wait_for

    process = start(
        url, workdir / f"{name}.log", "--interval", "0.2", **{SECRET_VARIABLE: SECRET}, **env
    )
    wait_for(lambda: "notifier started" in process.output(), timeout=60, message="notifier")
    return process


# -- the world -------------------------------------------------------------------


def webhook(name, url, kind="webhook"):
    from notifications.models import Channel

    secret = f"${{{SECRET_VARIABLE}}}" if kind == "webhook" else ""
    return Channel.objects.create(name=name, kind=kind, url=url, secret=secret, timeout=5.0)


def rule(name, events, channels):
    from notifications.models import Rule

    made = Rule.objects.create(name=name, events=events)
    made.channels.set(channels)
    return made


def running_executions(prefix, count, labels=()):
    """`count` jobs (no retries), each with one execution running under lease 1."""
    from django.utils import timezone

    from scheduler.models import Execution, Job

    now = timezone.now()
    jobs = Job.objects.bulk_create(
        Job(name=f"{prefix}-{n}", schedule="@every 1h", command="false", enabled=False,
            labels=list(labels))
        for n in range(count)
    )  # fmt: skip
    return Execution.objects.bulk_create(
        Execution(job=job, scheduled_for=now, run_after=now, created_at=now,
                  state=Execution.RUNNING, lease=1, claimed_at=now,
                  lease_expires_at=now + timedelta(hours=1))
        for job in jobs
    )  # fmt: skip


def fail(execution):
    """The runner's finish with exit code 1, as the finish call settles it."""
    from django.utils import timezone

    from scheduler.models import Execution
    from scheduler.runs import lifecycle

    lifecycle.settle(execution, Execution.FAILED, timezone.now(), exit_code=1)


# -- scenarios -------------------------------------------------------------------


def latency(url, workdir, failures):
    from harness.hooks import Hook

    hook = Hook(secret=SECRET)
    channel = webhook("latency-hook", hook.url)
    rule("latency-failures", ["execution.failed"], [channel])
    executions = running_executions("latency", failures)
    # Every failure alone: no incident grouping in this scenario.
    loop = start_loop(url, workdir, "latency-loop", CRONIQ_INCIDENT_THRESHOLD=10**6)
    samples = []
    try:
        for n, execution in enumerate(executions):
            started = time.time()
            fail(execution)
            deadline = time.monotonic() + 10
            while len(hook.received) <= n and time.monotonic() < deadline:
                time.sleep(0.0005)
            if len(hook.received) <= n:
                break
            samples.append(hook.received[n]["at"] - started)
            time.sleep(0.02)
    finally:
        loop.stop()
        hook.close()
    p50, p99 = percentile(samples, 50), percentile(samples, 99)
    emit(
        bench="notifications",
        scenario="latency",
        backend=backend(url),
        failures=failures,
        delivered=len(samples),
        verified=all(request["verified"] for request in hook.received),
        p50_ms=ms(p50),
        p99_ms=ms(p99),
        max_ms=ms(max(samples) if samples else None),
        target="p50 <= 100 ms, p99 <= 1000 ms",
        met=bool(samples) and len(samples) == failures and p50 <= 0.1 and p99 <= 1.0,
    )


def timed_loop(ticks_path):
    """The scheduler loop (and the notifier it starts), each tick's duration
    and CPU time appended to `ticks_path`: run as a child process until
    SIGTERM. With BENCH_STEPS set (--steps), also each step, each wait for
    SQLite's write lock (begin), each commit and each garbage collection, in
    `ticks_path`.steps."""
    import signal

    from notifications.notifier_process import die_with_parent
    from scheduler.firing.loop import SchedulerLoop

    # A bench stopped by a signal must not leave this loop (and its
    # notifier) running on, loading the machine under the next runs.
    die_with_parent()
    out = open(ticks_path, "a", buffering=1)  # noqa: SIM115 (lives as long as the process)
    steps_out = None
    if os.environ.get("BENCH_STEPS"):
        steps_out = open(f"{ticks_path}.steps", "a", buffering=1)  # noqa: SIM115

    def timed(name, run):
        def timed_run(*args):
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return run(*args)
            finally:
                wall, cpu = time.perf_counter() - started, time.thread_time() - cpu
                steps_out.write(f"{time.time()} {name} {wall} {cpu}\n")

        return timed_run

    class Timed(SchedulerLoop):
        def units(self, now, steps=None):
            found = super().units(now, steps)
            if steps_out is None:
                return found
            return [(name, timed(name, run)) for name, run in found]

        def tick(self, now):
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return super().tick(now)
            finally:
                wall, cpu = time.perf_counter() - started, time.thread_time() - cpu
                out.write(f"{time.time()} {wall} {cpu}\n")

    if steps_out is not None:
        time_database_calls(timed)
        time_collections(steps_out)
    loop = Timed(interval=0.2)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: loop.stop())
    loop.run_forever()


def time_database_calls(timed):
    """The loop's commits, and (SQLite) its waits for the write lock."""
    from django.db import connection

    connection._commit = timed("commit", connection._commit)
    begin = getattr(connection, "_start_transaction_under_autocommit", None)
    if begin is not None and connection.vendor == "sqlite":
        connection._start_transaction_under_autocommit = timed("begin", begin)


def time_collections(steps_out):
    import gc

    started = {}

    def callback(phase, info):
        if phase == "start":
            started["at"] = time.perf_counter()
        elif "at" in started:
            took = time.perf_counter() - started.pop("at")
            steps_out.write(f"{time.time()} gc{info['generation']} {took} {took}\n")

    gc.callbacks.append(callback)


def step_figures(path, start, end):
    """{name: figures} of what `timed_loop` logged in `path` within [start, end]."""
    found = {}
    for line in path.read_text().splitlines():
        at, name, wall, cpu = line.split()
        if start <= float(at) <= end:
            found.setdefault(name, []).append((float(wall), float(cpu)))
    figures = {}
    for name, samples in sorted(found.items()):
        walls = [wall for wall, _ in samples]
        figures[name] = {
            "n": len(samples),
            "wall_p50_ms": ms(percentile(walls, 50)),
            "wall_max_ms": ms(max(walls)),
            "wall_sum_ms": ms(sum(walls)),
            "cpu_sum_ms": ms(sum(cpu for _, cpu in samples)),
        }
    return figures


class TimedLoop:
    """`timed_loop` in a process of its own, as scheduler_loop runs."""

    def __init__(self, url, workdir, steps=False):
        from harness.processes import Process, process_env, wait_for

        self.path = workdir / "ticks.txt"
        self.steps = workdir / "ticks.txt.steps" if steps else None
        env = process_env(url, **{SECRET_VARIABLE: SECRET}, **({"BENCH_STEPS": 1} if steps else {}))
        self.process = Process(
            [sys.executable, __file__, "--timed-loop", str(self.path)], env, workdir / "timed.log"
        )
        wait_for(lambda: "notifier started" in self.process.output(), timeout=60)

    def stop(self):
        self.process.stop(timeout=30)

    def notifier_cpu(self):
        """CPU seconds the loop's child process (the notifier's) has used."""
        return sum(cpu_seconds(pid) for pid in children(self.process.popen.pid))

    def between(self, start, end, cpu=False):
        """The seconds (or CPU seconds) of the ticks that ran within [start,
        end]. A tick that began before `start` is left out: during the
        burst's, it may have waited for the bench's own write of the 1,000
        notifications (one transaction, 100 to 150 ms on SQLite), which is
        not the notifier's doing."""
        found = []
        for line in self.path.read_text().splitlines():
            at, seconds, cpu_seconds = map(float, line.split())
            if start <= at - seconds and at <= end:
                found.append(cpu_seconds if cpu else seconds)
        return found


def burst(url, workdir, steps=False):
    from django.db import transaction
    from django.utils import timezone

    from harness.hooks import Hook
    from notifications import wakeup
    from notifications.models import Notification
    from scheduler.models import Job

    hook = Hook(delay=BURST_ANSWER, secret=SECRET)
    channel = webhook("burst-hook", hook.url)
    Job.objects.bulk_create(
        Job(name=f"burst-tick-{n}", schedule="@every 1s", command="true",
            next_run_at=timezone.now())
        for n in range(BURST_JOBS)
    )  # fmt: skip
    loop = TimedLoop(url, workdir, steps)
    # The loop's steady state first, the tick's baseline: as long as the
    # burst lasts, so that it holds housekeeping ticks as the burst does.
    time.sleep(BURST_WARMUP + BURST_BASELINE)
    quiet_start, quiet_end = time.time() - BURST_BASELINE, time.time()
    quiet = loop.between(quiet_start, quiet_end)
    try:
        now = timezone.now()
        rows = []
        for n in range(BURST):
            row = Notification(
                channel=channel, name="execution.failed", created_at=now, next_attempt_at=now
            )
            row.message = {"id": str(row.pk), "event": "execution.failed",
                           "summary": f"burst #{n}", "url": "http://croniq.test/"}  # fmt: skip
            rows.append(row)
        notifier_cpu = loop.notifier_cpu()
        with transaction.atomic():
            Notification.objects.bulk_create(rows)
            wakeup.poke_after_commit()
        committed = time.time()
        pending = Notification.objects.filter(state=Notification.PENDING)
        deadline = time.monotonic() + 120
        while pending.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        done = time.time()
        notifier_cpu = loop.notifier_cpu() - notifier_cpu
    finally:
        loop.stop()
        hook.close()
    Job.objects.filter(name__startswith="burst-tick-").update(enabled=False)
    seconds = done - committed
    during = loop.between(committed, done)
    delivered = Notification.objects.filter(channel=channel, state="delivered").count()
    tick_p99 = percentile(during, 99)
    emit(
        bench="notifications",
        scenario="burst",
        backend=backend(url),
        notifications=BURST,
        delivered=delivered,
        requests=len(hook.received),
        seconds=round(seconds, 3),
        per_second=round(delivered / seconds, 1) if seconds else None,
        # The notifier's CPU for each notification: what the burst asks of
        # the machine, whatever else it is doing.
        notifier_cpu_ms_each=round(notifier_cpu / BURST * 1000, 2),
        ticks_during=len(during),
        tick_p50_ms=ms(percentile(during, 50)),
        tick_p99_ms=ms(tick_p99),
        tick_max_ms=ms(max(during, default=None)),
        tick_cpu_p99_ms=ms(percentile(loop.between(committed, done, cpu=True), 99)),
        tick_p99_before_ms=ms(percentile(quiet, 99)),
        tick_max_before_ms=ms(max(quiet, default=None)),
        tick_cpu_p99_before_ms=ms(percentile(loop.between(quiet_start, quiet_end, cpu=True), 99)),
        load_average=round(os.getloadavg()[0], 2),
        target="all within 10 s, tick p99 <= 20 ms",
        met=delivered == BURST and seconds <= 10 and tick_p99 is not None and tick_p99 <= 0.02,
    )
    if loop.steps is not None:
        for window, (start, end) in (
            ("before", (quiet_start, quiet_end)),
            ("during", (committed, done)),
        ):
            emit(bench="notifications", scenario="burst_steps", backend=backend(url),
                 window=window, steps=step_figures(loop.steps, start, end))  # fmt: skip


def paced_failure(started, n, execution):
    from django.db import connection

    pause = started + n * STORM_SECONDS / STORM_JOBS - time.monotonic()
    if pause > 0:
        time.sleep(pause)
    try:
        fail(execution)
    finally:
        connection.close()


def storm(url, workdir):
    from harness.hooks import Hook
    from notifications.models import Notification

    hook = Hook(secret=SECRET)
    chat = Hook(secret=None)
    channels = [webhook("storm-hook", hook.url), webhook("storm-chat", chat.url, kind="slack")]
    rule("storm-failures", ["execution.failed", "execution.given_up", "job.failing"], channels)
    executions = running_executions("storm", STORM_JOBS, labels=["pool-a"])
    loop = start_loop(url, workdir, "storm-loop", CRONIQ_INCIDENT_WINDOW=STORM_WINDOW)
    try:
        started = time.monotonic()
        # Finishes arrive from several web threads at once, spread over the run.
        with ThreadPoolExecutor(STORM_THREADS) as pool:
            list(pool.map(lambda item: paced_failure(started, *item), enumerate(executions)))
        storm_seconds = time.monotonic() - started
        # The incident closes STORM_WINDOW after it opened, then goes out.
        open_states = ["grouped", "pending"]
        deadline = time.monotonic() + STORM_WINDOW + 60
        while (
            time.monotonic() < deadline
            and Notification.objects.filter(name="incident.grouped", state__in=open_states).exists()
        ):
            time.sleep(0.2)
        time.sleep(2)
    finally:
        loop.stop()
        hook.close()
        chat.close()
    for channel, receiver in zip(channels, (hook, chat), strict=True):
        rows = Notification.objects.filter(channel=channel)
        by_state = {}
        for state in rows.values_list("state", flat=True):
            by_state[state] = by_state.get(state, 0) + 1
        sent = rows.filter(state="delivered").count()
        emit(
            bench="notifications",
            scenario="storm",
            backend=backend(url),
            channel=channel.name,
            failures=STORM_JOBS,
            seconds=round(storm_seconds, 1),
            delivered=sent,
            requests=len(receiver.received),
            incidents=rows.filter(name="incident.grouped").count(),
            states=by_state,
            target="<= 5 notifications per channel",
            met=len(receiver.received) <= 5 and sent >= 1,
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="latency,burst,storm")
    parser.add_argument("--failures", type=int, default=LATENCY_FAILURES)
    parser.add_argument(
        "--steps", action="store_true", help="burst: also where the ticks' time goes, by step"
    )
    parser.add_argument("--timed-loop", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.timed_loop:
        import django

        django.setup()
        return timed_loop(args.timed_loop)
    wanted = set(args.only.split(","))
    url = prepare_database()
    workdir = Path(tempfile.mkdtemp(prefix="croniq-notifications-bench-"))
    try:
        for name in ("latency", "burst", "storm"):
            if name not in wanted:
                continue
            if name != "burst" and not routing_present():
                emit(bench="notifications", scenario=name, backend=backend(url),
                     skipped="routing not present")  # fmt: skip
                continue
            if name == "latency":
                latency(url, workdir, args.failures)
            elif name == "burst":
                burst(url, workdir, args.steps)
            else:
                storm(url, workdir)
    finally:
        drop_database(url)


if __name__ == "__main__":
    main()
