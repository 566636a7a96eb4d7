"""Instant -> job body start, singleton against plain, with real processes.

A real uvicorn web process, a real scheduler_loop and two real agents
(`croniq-runner`), each serving one job `@every 1s`: `single` (singleton:
true) and `plain` (no overlap policy), run side by side so both see the
same machine. Each run's command writes its CRONIQ_SCHEDULED_FOR and the
wall clock at its start; the figure is the difference, p50 / p99 / max.
Target (issue "Fast for every job"): singleton p99 <= 25 ms.

    .venv/bin/python bench/singleton_latency.py            # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_singleton_bench \
        .venv/bin/python bench/singleton_latency.py        # a fresh database, dropped after

Options: --seconds N (default 40; the first 5 s are left out as warm-up).
"""

import argparse
import os
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The dispatch latency bench's database set-up and helpers (bench/ is on sys.path).
from dispatch_latency import emit, percentile, prepare_database  # noqa: E402

WARM_UP = 5.0
TARGET_P99_MS = 25


def start_agent(server_url, token, name, workdir):
    from harness.processes import Process, process_env

    env = process_env("sqlite:////nonexistent", XDG_STATE_HOME=workdir / "agent-state")
    agent = ROOT / ".venv" / "bin" / "croniq-runner"
    args = [str(agent), "--server", server_url, "--token", token, "--name", name]
    args += ["--labels", name, "--capacity", "2", "--log-level", "WARNING"]
    return Process(args, env, workdir / f"{name}.log")


def starts(path):
    """[ms from the scheduled instant to the body's start] of each run."""
    delays = []
    for line in path.read_text().splitlines() if path.exists() else []:
        scheduled, started = line.split()
        instant = datetime.fromisoformat(scheduled.replace("Z", "+00:00")).timestamp()
        delays.append((instant, (float(started) - instant) * 1000))
    return delays


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=40.0)
    options = parser.parse_args()
    url = prepare_database()
    from django.utils import timezone

    from harness.processes import Server, drop_database, start_loop
    from runners.models import RunnerToken
    from scheduler.models import Job

    workdir = Path(tempfile.mkdtemp(prefix="croniq-singleton-bench-"))
    secret = RunnerToken.issue(f"bench-{uuid.uuid4().hex[:8]}")[1]
    processes = []
    try:
        web = Server(url, workdir / "web.log")
        processes.append(web)
        web.wait_ready()
        agents = [start_agent(web.url, secret, name, workdir) for name in ("single", "plain")]
        processes += agents
        time.sleep(2)  # both agents registered and polling
        begin = time.time() + 1
        for name in ("single", "plain"):
            Job.objects.create(
                name=name,
                schedule="@every 1s",
                command=f'echo "$CRONIQ_SCHEDULED_FOR $(date +%s.%N)" >> {workdir / name}.txt',
                labels=[name],
                singleton=name == "single",
                next_run_at=timezone.now().replace(microsecond=0) + timezone.timedelta(seconds=2),
            )
        processes.append(start_loop(url, workdir / "loop.log"))
        time.sleep(options.seconds)
    finally:
        for process in reversed(processes):
            process.stop()
    for name in ("single", "plain"):
        delays = [d for at, d in starts(workdir / f"{name}.txt") if at >= begin + WARM_UP]
        if not delays:
            emit(bench="singleton_latency", job=name, samples=0, met=False)
            continue
        p99 = percentile(delays, 99)
        emit(
            bench="singleton_latency",
            backend="postgresql" if url.startswith("postgres") else "sqlite",
            job=name,
            singleton=name == "single",
            samples=len(delays),
            p50_ms=round(percentile(delays, 50), 2),
            p99_ms=round(p99, 2),
            max_ms=round(max(delays), 2),
            load_average=os.getloadavg()[0],
            target_p99_ms=TARGET_P99_MS if name == "single" else None,
            met=p99 <= TARGET_P99_MS,
        )
    drop_database(url)


if __name__ == "__main__":
    main()
