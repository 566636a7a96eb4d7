"""Check-in benchmarks (docs/design.md §12): JSON lines.

- pings: success pings over HTTP against real web processes
  (`harness.processes.Server`, uvicorn), over --clients keep-alive
  connections, spread over many checks (each under its flood limit of 60
  a minute): pings per second, latency p50/p99, the web processes' CPU
  per ping, and the client's. Target: 1,000 pings/s. The client is wrk
  (Debian's package `wrk`) where it is installed: on a two-core machine
  Python's http.client in threads took some 0.4 ms of CPU a ping, a core's
  worth at the target, taken from the web processes it measures; wrk
  takes a tenth of that. `--client python` forces the threads.
- evaluation: the loop's step (`checks.evaluation.evaluate`) in this
  process on 10,000 checks: all overdue by their period (going late: one
  set-based UPDATE), all past their grace (going down: rows read, moved,
  one check.down event each), and a quiet pass (nothing due: two index
  probes). Target: 10,000 checks evaluated per second.
- tick: the scheduler loop's tick duration p50/p99 with no pings, then
  while pings run at --rate (default the target, 1,000/s), on the same
  database: the loop runs in a process of its own as scheduler_loop runs it
  (`TimedLoop` of bench/notifications.py: `SchedulerLoop.run_forever`, its
  notifier beside it, each tick timed; its interval is 0.2 s), with
  TICK_JOBS jobs @every 1s firing, beside the web processes. Idle and
  pinged windows take turns, --tick-rounds of each (default 3), each
  --tick-seconds long (default 30): some 450 ticks of each kind, so that
  the p99 is the fifth slowest, not the second (which moved by a third from
  run to run). Also the ticks' count (on SQLite each ping's commit
  wakes the loop's commit watcher, which may make it tick more often) and
  the CPU of the loop's process and of its notifier in each window: the
  watcher's wake-ups cost there, not in the ticks. Target: the pinged p99
  within TICK_P99_SLACK of the idle one (25%, or 2 ms if more), at the
  pings' target rate.

    .venv/bin/python bench/checks.py                      # SQLite, a temporary file
    .venv/bin/python bench/checks.py --postgres           # PostgreSQL at
        CRONIQ_TEST_DATABASE_URL (or DATABASE_URL): a fresh database, dropped after

Options: --only pings,evaluation,tick  --seconds N (pings, default 10)
         --client wrk|python (pings and tick; default wrk when on PATH)
         --tick-seconds N (tick: each window, default 30)
         --tick-rounds N (tick: idle and pinged windows of each, default 3)
         --clients N (threads, default 16)  --processes N (web, default 1)
         --checks N (evaluation, default 10000)
         --rate N (tick: pings per second, all clients together, default 1000)
"""

import argparse
import http.client
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

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


def load_bench(name: str) -> Any:
    """bench/`name`.py as a module named bench_`name`: bench/notifications.py
    cannot be imported by its name, which is the notifications app's."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench_notifications = load_bench("notifications")  # its TimedLoop

# Pings spread over them: 10 s at 1,000/s is 5 a check (the tick's 30 s: 15).
PING_CHECKS = 2000
WARM_CHECKS = 1000  # the warm-up's second of pings, under the limit too
PINGS_PER_SECOND = 1000
EVALUATED_PER_SECOND = 10_000
TICK_JOBS = 5  # jobs @every 1s the loop fires during the tick windows
TICK_WARMUP = 3.0  # seconds after the webs' warm-up before the idle window
# "Unchanged": the pinged tick p99 at most this much above the idle one
# (a fraction of it, or milliseconds, whichever is more): what the p99 of
# some 450 ticks moves by from run to run.
TICK_P99_SLACK = (0.25, 2.0)


def make_checks(count: int, **fields: Any) -> list[str]:
    from checks.models import Check

    rows = [Check(name=f"bench-{n}", period=3600, **fields) for n in range(count)]
    Check.objects.bulk_create(rows, batch_size=1000)
    return list(Check.objects.order_by("id").values_list("token", flat=True))


# -- pings -----------------------------------------------------------------------


class Client(threading.Thread):
    """Pings the tokens it is dealt, round and round, over one keep-alive
    connection, until `stop` is set; keeps each ping's latency."""

    def __init__(
        self, url: str, tokens: list[str], stop: threading.Event, per_second: float | None = None
    ) -> None:
        super().__init__(daemon=True)
        host, port = url.removeprefix("http://").split(":")
        self.host, self.port = host, int(port)
        self.tokens, self.stop = tokens, stop
        self.per_second = per_second  # None: as fast as answers come
        self.latencies: list[float] = []  # seconds
        self.failures = 0

    def run(self) -> None:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=10)
        n = 0
        began = time.perf_counter()
        while not self.stop.is_set():
            if self.per_second:
                # On a schedule from the start: a late ping is sent at once,
                # so the rate holds as long as the web processes keep up.
                pause = began + n / self.per_second - time.perf_counter()
                if pause > 0 and self.stop.wait(pause):
                    break
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


# wrk's script: each request pings the next token of the list (each thread
# from its own offset), and the summary is one JSON line.
WRK_SCRIPT = """
local tokens, n, threads = {}, 0, 0
function setup(thread)
  thread:set("offset", threads)
  threads = threads + 1
end
function init(args)
  for line in io.lines(args[1]) do tokens[#tokens + 1] = line end
  n = (tonumber(offset) or 0) * 997
end
function request()
  n = n + 1
  return wrk.format("GET", "/ping/" .. tokens[(n % #tokens) + 1])
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "non_2xx": %d, "errors": %d, '
    .. '"p50_us": %d, "p99_us": %d}\\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


# With a rate: each connection pauses between an answer and its next ping
# (wrk's delay(), whole milliseconds).
WRK_PAUSE = """
function delay()
  return pause
end
"""


def wrk_pings(
    url: str,
    tokens: list[str],
    workdir: Path,
    seconds: float,
    connections: int,
    pause_ms: int | None = None,
) -> dict[str, Any]:
    """Pings as fast as `connections` keep-alive connections of wrk get
    answers (or each `pause_ms` after its answer), for `seconds`: its
    summary, and its CPU seconds."""
    workdir.mkdir(parents=True, exist_ok=True)
    script, listed = workdir / "pings.lua", workdir / "tokens.txt"
    paced = "" if pause_ms is None else f"pause = {pause_ms}\n" + WRK_PAUSE
    script.write_text(WRK_SCRIPT + paced)
    listed.write_text("\n".join(tokens) + "\n")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "10s"]
    command += ["-s", str(script), url, "--", str(listed)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    summary["cpu"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return summary


def warm_up(webs: list[Any], spare: list[str]) -> None:
    """A second of pings to each web process: its first requests load what
    it imports late. Checks of their own: the flood limit must not meet the
    measured pings."""
    warm = threading.Event()
    warmers = [Client(web.url, spare[n :: len(webs)], warm) for n, web in enumerate(webs)]
    for warmer in warmers:
        warmer.start()
    time.sleep(1.0)
    warm.set()
    for warmer in warmers:
        warmer.join()


def bench_pings(
    url: str, workdir: Path, seconds: float, clients: int, processes: int, client: str
) -> None:
    every = make_checks(PING_CHECKS + WARM_CHECKS)
    tokens, spare = every[:PING_CHECKS], every[PING_CHECKS:]
    webs = start_webs(url, workdir, processes)
    try:
        warm_up(webs, spare)
        cpu_before = sum(cpu_seconds(web.popen.pid) for web in webs)
        started = time.perf_counter()
        if client == "wrk":
            done, failures, p50, p99, client_cpu = wrk_window(
                webs, tokens, workdir, seconds, clients
            )
        else:
            done, failures, p50, p99, client_cpu = python_window(webs, tokens, seconds, clients)
        elapsed = time.perf_counter() - started
        cpu = sum(cpu_seconds(web.popen.pid) for web in webs) - cpu_before
    finally:
        stop_webs(webs)
    per_second = round(done / elapsed, 1)
    emit(
        scenario="pings",
        backend=backend(url),
        client=client,
        processes=processes,
        clients=clients,
        pings=done,
        failures=failures,
        pings_per_second=per_second,
        p50_ms=p50,
        p99_ms=p99,
        web_cpu_ms_per_ping=round(cpu / done * 1000, 3) if done else None,
        client_cpu_ms_per_ping=round(client_cpu / done * 1000, 3) if done else None,
        load_average=round(os.getloadavg()[0], 2),
        target_per_second=PINGS_PER_SECOND,
        met=per_second >= PINGS_PER_SECOND,
    )


def wrk_window(
    webs: list[Any],
    tokens: list[str],
    workdir: Path,
    seconds: float,
    clients: int,
    pause_ms: int | None = None,
) -> tuple[int, int, float | None, float | None, float]:
    """(pings, failures, p50 ms, p99 ms, client CPU seconds): one wrk per web
    process, side by side, the connections and tokens dealt among them (the
    percentiles are the first process's)."""
    from concurrent.futures import ThreadPoolExecutor

    count = len(webs)
    with ThreadPoolExecutor(count) as pool:
        runs = [
            pool.submit(
                wrk_pings,
                web.url,
                tokens[n::count],
                workdir / f"wrk-{n}",
                seconds,
                max(1, clients // count),
                pause_ms,
            )
            for n, web in enumerate(webs)
        ]
        summaries = [run.result() for run in runs]
    done = sum(summary["requests"] for summary in summaries)
    failures = sum(summary["non_2xx"] + summary["errors"] for summary in summaries)
    first = summaries[0]
    return (
        done,
        failures,
        first["p50_us"] / 1000,
        first["p99_us"] / 1000,
        sum(summary["cpu"] for summary in summaries),
    )


def python_window(
    webs: list[Any], tokens: list[str], seconds: float, clients: int
) -> tuple[int, int, float | None, float | None, float]:
    """`wrk_window` with Client threads in this process (their CPU: this
    process's, over the window)."""
    stop = threading.Event()
    workers = [Client(webs[n % len(webs)].url, tokens[n::clients], stop) for n in range(clients)]
    cpu = time.process_time()
    for worker in workers:
        worker.start()
    time.sleep(seconds)
    stop.set()
    for worker in workers:
        worker.join()
    cpu = time.process_time() - cpu
    latencies = [latency for worker in workers for latency in worker.latencies]
    failures = sum(worker.failures for worker in workers)
    return (
        len(latencies),
        failures,
        ms(percentile(latencies, 50)),
        ms(percentile(latencies, 99)),
        cpu,
    )


# -- the loop's tick under pings ------------------------------------------------


def ping_window(
    webs: list[Any],
    tokens: list[str],
    clients: int,
    rate: float,
    seconds: float,
    client: str,
    workdir: Path,
) -> tuple[int, int, float]:
    """Pings at about `rate` a second (all clients together) for `seconds`:
    (pings answered, failures, elapsed seconds). With wrk, each connection
    pauses so that its answer and pause take clients/rate seconds, the
    answer's share measured first (`paced`): the rate reached is reported."""
    if client == "wrk":
        pause_ms = paced(webs, spare_of(tokens), workdir / "calibration", clients, rate)
        started = time.perf_counter()
        done, failures, _, _, _ = wrk_window(webs, tokens, workdir, seconds, clients, pause_ms)
        return done, failures, time.perf_counter() - started
    stop = threading.Event()
    workers = [
        Client(webs[n % len(webs)].url, tokens[n::clients], stop, rate / clients)
        for n in range(clients)
    ]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    time.sleep(seconds)
    stop.set()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    done = sum(len(worker.latencies) for worker in workers)
    return done, sum(worker.failures for worker in workers), elapsed


CALIBRATION_SECONDS = 2.0


def spare_of(tokens: list[str]) -> list[str]:
    """Tokens for the calibration: the second half of those of the window
    (each check stays far under its flood limit: 2 s at the target rate is
    two pings each)."""
    return tokens[len(tokens) // 2 :]


def paced(webs: list[Any], tokens: list[str], workdir: Path, clients: int, rate: float) -> int:
    """wrk's pause (ms) for `rate`: a first guess run for CALIBRATION_SECONDS
    tells how long the answers themselves take at that pace."""
    interval = clients / rate  # seconds between two pings of one connection
    guess = max(0, round(interval * 1000) - 1)
    done, _, _, _, _ = wrk_window(webs, tokens, workdir, CALIBRATION_SECONDS, clients, guess)
    answer = max(0.0, clients * CALIBRATION_SECONDS / max(done, 1) - guess / 1000)
    return max(0, int((interval - answer) * 1000))  # whole ms, rounded down: at least the rate


class Window:
    """The loop's CPU (its process, and its notifier's) over a window of
    wall time, from `start` until `end()` is called."""

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.cpu = cpu_seconds(loop.process.popen.pid)
        self.notifier = loop.notifier_cpu()
        self.start = time.time()

    def end(self) -> None:
        self.stop = time.time()
        seconds = self.stop - self.start
        self.cpu_percent = (cpu_seconds(self.loop.process.popen.pid) - self.cpu) / seconds * 100
        self.notifier_percent = (self.loop.notifier_cpu() - self.notifier) / seconds * 100
        self.ticks = self.loop.between(self.start, self.stop)
        self.ticks_per_second = len(self.ticks) / seconds


class Pooled:
    """Windows of one kind taken together: their ticks, and their loop's
    and notifier's CPU over their whole time."""

    def __init__(self, windows: list[Window]) -> None:
        self.ticks = [tick for window in windows for tick in window.ticks]
        seconds = sum(window.stop - window.start for window in windows)
        self.ticks_per_second = len(self.ticks) / seconds
        self.cpu_percent = weighted(windows, "cpu_percent")
        self.notifier_percent = weighted(windows, "notifier_percent")


def weighted(windows: list[Window], name: str) -> float:
    """The windows' `name` (a percentage of their time), over all of it."""
    seconds = [window.stop - window.start for window in windows]
    return sum(getattr(w, name) * s for w, s in zip(windows, seconds, strict=True)) / sum(seconds)


def bench_tick(
    url: str,
    workdir: Path,
    seconds: float,
    rounds: int,
    clients: int,
    processes: int,
    rate: float,
    client: str,
) -> None:
    from django.utils import timezone

    from checks.models import Check
    from scheduler.models import Job

    Check.objects.all().delete()  # those of an earlier scenario: fresh ones, none pinged
    every = make_checks(PING_CHECKS + WARM_CHECKS)
    tokens, spare = every[:PING_CHECKS], every[PING_CHECKS:]
    # One instant for all: jobs microseconds apart may fire in two ticks
    # (the first tick's `now` falls between them), more often the more
    # precisely the loop wakes: not the pings' doing.
    instant = timezone.now()
    Job.objects.bulk_create(
        Job(name=f"tick-{n}", schedule="@every 1s", command="true", next_run_at=instant)
        for n in range(TICK_JOBS)
    )
    loop = bench_notifications.TimedLoop(url, workdir)
    webs = []
    idles: list[Window] = []
    pingeds: list[Window] = []
    pings = failures = 0
    elapsed = 0.0
    try:
        webs = start_webs(url, workdir, processes)
        warm_up(webs, spare)
        # Idle and pinged windows take turns, so that whatever drifts over
        # the minutes (the database's caches, its checkpoints, the rest of
        # the machine) weighs on both alike.
        for _ in range(rounds):
            time.sleep(TICK_WARMUP)  # the last flood of commits over, the loop at rest
            quiet = Window(loop)
            time.sleep(seconds)
            quiet.end()
            busy = Window(loop)
            done, failed, took = ping_window(
                webs, tokens, clients, rate, seconds, client, workdir / "tick"
            )
            busy.end()
            idles.append(quiet)
            pingeds.append(busy)
            pings, failures, elapsed = pings + done, failures + failed, elapsed + took
    finally:
        stop_webs(webs)
        loop.stop()
        Job.objects.filter(name__startswith="tick-").update(enabled=False)
    idle, pinged = Pooled(idles), Pooled(pingeds)
    per_second = round(pings / elapsed, 1)
    p99_idle, p99_pinged = percentile(idle.ticks, 99), percentile(pinged.ticks, 99)
    fraction, slack_ms = TICK_P99_SLACK
    unchanged = (
        p99_idle is not None
        and p99_pinged is not None
        and p99_pinged <= p99_idle + max(p99_idle * fraction, slack_ms / 1000)
    )
    emit(
        bench="checks.tick_under_pings",
        backend=backend(url),
        client=client,
        processes=processes,
        clients=clients,
        jobs=TICK_JOBS,
        window_seconds=seconds,
        rounds=rounds,
        tick_p50_ms_idle=ms(percentile(idle.ticks, 50)),
        tick_p99_ms_idle=ms(p99_idle),
        tick_max_ms_idle=ms(max(idle.ticks, default=None)),
        ticks_idle=len(idle.ticks),
        ticks_per_second_idle=round(idle.ticks_per_second, 2),
        tick_p50_ms_pinged=ms(percentile(pinged.ticks, 50)),
        tick_p99_ms_pinged=ms(p99_pinged),
        tick_max_ms_pinged=ms(max(pinged.ticks, default=None)),
        ticks_pinged=len(pinged.ticks),
        ticks_per_second_pinged=round(pinged.ticks_per_second, 2),
        # The loop's process (tick and housekeeping threads, the commit
        # watcher) and its notifier: what each ping's commit wakes.
        loop_cpu_percent_idle=round(idle.cpu_percent, 2),
        loop_cpu_percent_pinged=round(pinged.cpu_percent, 2),
        notifier_cpu_percent_idle=round(idle.notifier_percent, 2),
        notifier_cpu_percent_pinged=round(pinged.notifier_percent, 2),
        pings=pings,
        failures=failures,
        rate=rate,
        pings_per_second=per_second,
        load_average=round(os.getloadavg()[0], 2),
        target=f"{PINGS_PER_SECOND} pings/s, tick p99 within {int(fraction * 100)}% "
        f"or {slack_ms:g} ms of the idle one",
        tick_p99_unchanged=unchanged,
        met=unchanged and per_second >= PINGS_PER_SECOND,
    )


# -- evaluation ------------------------------------------------------------------


def bench_evaluation(count: int) -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="pings,evaluation,tick")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--checks", type=int, default=10_000)
    parser.add_argument("--tick-seconds", type=float, default=30.0)
    parser.add_argument("--tick-rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=PINGS_PER_SECOND)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument(
        "--client", choices=("wrk", "python"), default="wrk" if shutil.which("wrk") else "python"
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    unknown = only - {"pings", "evaluation", "tick"}
    if unknown:
        parser.error(f"--only: unknown scenario(s) {', '.join(sorted(unknown))}")
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
        if "pings" in only:
            bench_pings(url, workdir, args.seconds, args.clients, args.processes, args.client)
        if "tick" in only:
            # Before evaluation, which leaves 10,000 checks down and their events.
            bench_tick(
                url,
                workdir,
                args.tick_seconds,
                args.tick_rounds,
                args.clients,
                args.processes,
                args.rate,
                args.client,
            )
        if "evaluation" in only:
            bench_evaluation(args.checks)
    finally:
        drop_database(url)


if __name__ == "__main__":
    main()
