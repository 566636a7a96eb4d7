"""Check-in benchmarks (docs/design.md §12): JSON lines.

- pings: success pings over HTTP against real web processes
  (`harness.processes.Server`, uvicorn), keep-alive clients in threads,
  spread over many checks (each under its flood limit of 60 a minute):
  pings per second, latency p50/p99, and the web processes' CPU per
  ping. Target: 1,000 pings/s.
- evaluation: the loop's step (`checks.evaluation.evaluate`) in this
  process on 10,000 checks: all overdue by their period (going late: one
  set-based UPDATE), all past their grace (going down: rows read, moved,
  one check.down event each), and a quiet pass (nothing due: two index
  probes). Target: 10,000 checks evaluated per second.

    .venv/bin/python bench/checks.py                      # SQLite, a temporary file
    .venv/bin/python bench/checks.py --postgres           # PostgreSQL at
        CRONIQ_TEST_DATABASE_URL (or DATABASE_URL): a fresh database, dropped after

Options: --only pings,evaluation  --seconds N (pings, default 10)
         --clients N (threads, default 16)  --processes N (web, default 1)
         --checks N (evaluation, default 10000)
"""

import argparse
import http.client
import os
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dispatch_latency import (  # noqa: E402 (bench/ is on sys.path)
    backend,
    cpu_seconds,
    drop_database,
    emit,
    ms,
    percentile,
    prepare_database,
    start_webs,
    stop_webs,
)

PING_CHECKS = 2000  # pings spread over them: 10 s at 1,000/s is 5 a check
WARM_CHECKS = 1000  # the warm-up's second of pings, under the limit too
PINGS_PER_SECOND = 1000
EVALUATED_PER_SECOND = 10_000


def make_checks(count, **fields):
    from checks.models import Check

    rows = [Check(name=f"bench-{n}", period=3600, **fields) for n in range(count)]
    Check.objects.bulk_create(rows, batch_size=1000)
    return list(Check.objects.order_by("id").values_list("token", flat=True))


# -- pings -----------------------------------------------------------------------


class Client(threading.Thread):
    """Pings the tokens it is dealt, round and round, over one keep-alive
    connection, until `stop` is set; keeps each ping's latency."""

    def __init__(self, url, tokens, stop):
        super().__init__(daemon=True)
        host, port = url.removeprefix("http://").split(":")
        self.host, self.port = host, int(port)
        self.tokens, self.stop = tokens, stop
        self.latencies, self.failures = [], 0

    def run(self):
        connection = http.client.HTTPConnection(self.host, self.port, timeout=10)
        n = 0
        while not self.stop.is_set():
            token = self.tokens[n % len(self.tokens)]
            n += 1
            started = time.perf_counter()
            try:
                connection.request("GET", f"/ping/{token}")
                answer = connection.getresponse()
                answer.read()
            except (OSError, http.client.HTTPException):
                connection.close()
                connection = http.client.HTTPConnection(self.host, self.port, timeout=10)
                self.failures += 1
                continue
            if answer.status != 200:
                self.failures += 1
            self.latencies.append(time.perf_counter() - started)


def bench_pings(url, workdir, seconds, clients, processes):
    every = make_checks(PING_CHECKS + WARM_CHECKS)
    tokens, spare = every[:PING_CHECKS], every[PING_CHECKS:]
    webs = start_webs(url, workdir, processes)
    try:
        # Warm up: the first requests of a process load what it imports late.
        # Checks of their own: the flood limit must not meet the measured pings.
        warm = threading.Event()
        warmers = [Client(web.url, spare[n::processes], warm) for n, web in enumerate(webs)]
        for warmer in warmers:
            warmer.start()
        time.sleep(1.0)
        warm.set()
        for warmer in warmers:
            warmer.join()
        stop = threading.Event()
        workers = [
            Client(webs[n % len(webs)].url, tokens[n::clients], stop) for n in range(clients)
        ]
        cpu_before = sum(cpu_seconds(web.popen.pid) for web in webs)
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        time.sleep(seconds)
        stop.set()
        for worker in workers:
            worker.join()
        elapsed = time.perf_counter() - started
        cpu = sum(cpu_seconds(web.popen.pid) for web in webs) - cpu_before
    finally:
        stop_webs(webs)
    latencies = [latency for worker in workers for latency in worker.latencies]
    done = len(latencies)
    per_second = round(done / elapsed, 1)
    emit(
        scenario="pings",
        backend=backend(url),
        processes=processes,
        clients=clients,
        pings=done,
        failures=sum(worker.failures for worker in workers),
        pings_per_second=per_second,
        p50_ms=ms(percentile(latencies, 50)),
        p99_ms=ms(percentile(latencies, 99)),
        web_cpu_ms_per_ping=round(cpu / done * 1000, 3) if done else None,
        target_per_second=PINGS_PER_SECOND,
        met=per_second >= PINGS_PER_SECOND,
    )


# -- evaluation ------------------------------------------------------------------


def bench_evaluation(count):
    from django.utils import timezone

    from checks import evaluation
    from checks.models import Check
    from notifications.models import Event

    now = timezone.now()
    Check.objects.all().delete()
    make_checks(
        count,
        state="up",
        last_ping_at=now - timedelta(hours=2),
        next_expected_at=now - timedelta(hours=1),
        down_at=now + timedelta(hours=1),
    )
    figures = {}

    started = time.perf_counter()
    moved = evaluation.evaluate(now)
    figures["late"] = (moved, time.perf_counter() - started)

    started = time.perf_counter()
    quiet = evaluation.evaluate(now)
    figures["quiet"] = (quiet, time.perf_counter() - started)

    later = now + timedelta(hours=2)
    started = time.perf_counter()
    moved = 0
    while True:
        step = evaluation.evaluate(later)
        moved += step
        if not step:
            break
    figures["down"] = (moved, time.perf_counter() - started)
    events = Event.objects.filter(name="check.down").count()

    for name, (changed, seconds) in figures.items():
        per_second = round(count / seconds, 1) if seconds else None
        emit(
            scenario=f"evaluation_{name}",
            backend=backend(os.environ["DATABASE_URL"]),
            checks=count,
            changed=changed,
            seconds=round(seconds, 4),
            checks_evaluated_per_second=per_second,
            events=events if name == "down" else None,
            target_per_second=EVALUATED_PER_SECOND,
            met=per_second is not None and per_second >= EVALUATED_PER_SECOND,
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="pings,evaluation")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--checks", type=int, default=10_000)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    if args.postgres:
        url = os.environ.get("CRONIQ_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
        if not url or not url.startswith("postgres"):
            sys.exit("--postgres needs CRONIQ_TEST_DATABASE_URL (or DATABASE_URL) = postgres://...")
        os.environ["DATABASE_URL"] = url
    elif not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        os.environ.pop("DATABASE_URL", None)  # a temporary SQLite file
    url = prepare_database()
    workdir = Path(tempfile.mkdtemp(prefix="croniq-bench-checks-"))
    try:
        only = set(args.only.split(","))
        if "pings" in only:
            bench_pings(url, workdir, args.seconds, args.clients, args.processes)
        if "evaluation" in only:
            bench_evaluation(args.checks)
    finally:
        drop_database(url)


if __name__ == "__main__":
    main()
