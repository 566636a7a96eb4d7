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

LATENCY_FAILURES = 200
BURST = 1000
BURST_ANSWER = 0.010  # seconds the burst's receiver takes to answer
BURST_JOBS = 5  # jobs @every 1s firing during the burst
STORM_JOBS = 500
STORM_SECONDS = 40.0  # the failures are spread over this (within one minute)
STORM_THREADS = 4  # finishes settled at once, as several web threads would
# CRONIQ_INCIDENT_WINDOW of the storm (default 300 s): one minute, so that
# its incident closes (and is delivered) within the run.
STORM_WINDOW = 60
SECRET_VARIABLE = "CRONIQ_BENCH_HOOK_SECRET"
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
        from tests.e2e.processes import drop_database as drop

        drop(url)


def backend(url):
    return "postgresql" if url.startswith("postgres") else "sqlite"


def routing_present():
    return importlib.util.find_spec("notifications.routing") is not None


def start_loop(url, workdir, name, **env):
    from tests.e2e.processes import start_loop as start
    from tests.e2e.processes import wait_for

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

    from scheduler import lifecycle
    from scheduler.models import Execution

    lifecycle.settle(execution, Execution.FAILED, timezone.now(), exit_code=1)


# -- scenarios -------------------------------------------------------------------


def latency(url, workdir, failures):
    from tests.notifications.hooks import Hook

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
    appended to `ticks_path`: run as a child process until SIGTERM."""
    import signal

    from scheduler.loop import SchedulerLoop

    out = open(ticks_path, "a", buffering=1)  # noqa: SIM115 (lives as long as the process)

    class Timed(SchedulerLoop):
        def tick(self, now):
            started = time.perf_counter()
            try:
                return super().tick(now)
            finally:
                out.write(f"{time.time()} {time.perf_counter() - started}\n")

    loop = Timed(interval=0.2)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: loop.stop())
    loop.run_forever()


class TimedLoop:
    """`timed_loop` in a process of its own, as scheduler_loop runs."""

    def __init__(self, url, workdir):
        from tests.e2e.processes import Process, process_env, wait_for

        self.path = workdir / "ticks.txt"
        env = process_env(url, **{SECRET_VARIABLE: SECRET})
        self.process = Process(
            [sys.executable, __file__, "--timed-loop", str(self.path)], env, workdir / "timed.log"
        )
        wait_for(lambda: "notifier started" in self.process.output(), timeout=60)

    def stop(self):
        self.process.stop(timeout=30)

    def between(self, start, end):
        found = []
        for line in self.path.read_text().splitlines():
            at, seconds = map(float, line.split())
            if start <= at <= end:
                found.append(seconds)
        return found


def burst(url, workdir):
    from django.db import transaction
    from django.utils import timezone

    from notifications import wakeup
    from notifications.models import Notification
    from scheduler.models import Job
    from tests.notifications.hooks import Hook

    hook = Hook(delay=BURST_ANSWER, secret=SECRET)
    channel = webhook("burst-hook", hook.url)
    Job.objects.bulk_create(
        Job(name=f"burst-tick-{n}", schedule="@every 1s", command="true",
            next_run_at=timezone.now())
        for n in range(BURST_JOBS)
    )  # fmt: skip
    loop = TimedLoop(url, workdir)
    time.sleep(3)  # the loop's steady state first: the tick's baseline
    quiet = loop.between(time.time() - 2.5, time.time())
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
        with transaction.atomic():
            Notification.objects.bulk_create(rows)
            wakeup.poke_after_commit()
        committed = time.time()
        pending = Notification.objects.filter(state=Notification.PENDING)
        deadline = time.monotonic() + 120
        while pending.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        done = time.time()
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
        ticks_during=len(during),
        tick_p50_ms=ms(percentile(during, 50)),
        tick_p99_ms=ms(tick_p99),
        tick_p99_before_ms=ms(percentile(quiet, 99)),
        target="all within 10 s, tick p99 <= 20 ms",
        met=delivered == BURST and seconds <= 10 and tick_p99 is not None and tick_p99 <= 0.02,
    )


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
    from notifications.models import Notification
    from tests.notifications.hooks import Hook

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
                burst(url, workdir)
            else:
                storm(url, workdir)
    finally:
        drop_database(url)


if __name__ == "__main__":
    main()
