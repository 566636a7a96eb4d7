"""Several web processes on one PostgreSQL (issue 21): 1, 2 and 4 uvicorn
processes, the simulated runners dealt round them.

The dispatch bench's scenarios (bench/dispatch_latency.py), with runner n speaking
only to process n mod N, as a round-robin load balancer would send it:

- steady: 50 jobs `@every 1s` through the real loop, 20 runners
  long-polling; instant -> the assignment reaches the runner, p50/p99. The
  loop's `NOTIFY croniq_work` must reach every process's `LISTEN`
  (`delivered_by_process`: what each process handed out).
- burst: 1,000 executions due at once, 100 waiting runners; time from the
  commit until the last one is in a runner's hands.
- throughput: claim + finish over HTTP, executions per second, and the web
  processes' CPU per execution (all of them together); the runs of a poll
  reported in one call, as the agent reports runs that end together, and
  (`each_*`) each with its own finish, as an older agent.

Each web process is a `harness.processes.Server` (one uvicorn worker on
a port of its own), not `uvicorn --workers N` behind one port: the runners
are spread exactly, and each process's CPU and deliveries are its own.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_web_processes_bench \\
        .venv/bin/python bench/web_processes.py     # a fresh database, dropped after

On SQLite (DATABASE_URL unset) it prints one line saying why it does not
run, and exits 0: the web processes' wake-ups are PostgreSQL's NOTIFY.

Options: --only steady,burst,throughput  --processes 1,2,4  --seconds N
(steady duration, default 20). The steady runners poll with `slots`, as the
agent does; BENCH_POLL_SLOTS=0 polls without it, as an older agent.
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The dispatch latency bench's scenarios and helpers (bench/ is on sys.path).
from dispatch_latency import (  # noqa: E402
    BURST_EXECUTIONS,
    BURST_RUNNERS,
    STEADY_JOBS,
    STEADY_RUNNERS,
    THROUGHPUT_RUNNERS,
    burst_figures,
    burst_met,
    drop_database,
    emit,
    prepare_database,
    steady_figures,
    throughput_figures,
)

STEADY_P99_MS = 25
BURST_LAST_MS = 1000
PER_SECOND = 500


def steady(url, workdir, processes, options):
    figures = steady_figures(url, workdir, options.seconds, STEADY_JOBS, processes)
    return dict(
        jobs=STEADY_JOBS,
        runners=STEADY_RUNNERS,
        **figures,
        target=f"p99<={STEADY_P99_MS}ms",
        met=figures["p99_ms"] is not None and figures["p99_ms"] <= STEADY_P99_MS,
    )


def burst(url, workdir, processes, options):
    figures = burst_figures(url, workdir, processes)
    return dict(
        executions=BURST_EXECUTIONS,
        runners=BURST_RUNNERS,
        **figures,
        target=f"last<={BURST_LAST_MS}ms",
        met=burst_met(figures, BURST_LAST_MS),
    )


def throughput(url, workdir, processes, options):
    """The runs of a poll reported together (the agent), and each with its
    own finish (an older agent): `each_*`."""
    figures = throughput_figures(url, workdir, processes=processes)
    each = throughput_figures(url, workdir, processes=processes, together=False)
    return dict(
        runners=THROUGHPUT_RUNNERS,
        **figures,
        each_per_second=each["per_second"],
        each_web_cpu_ms_per_execution=each["web_cpu_ms_per_execution"],
        target=f">={PER_SECOND}/s",
        met=figures["per_second"] >= PER_SECOND,
    )


SCENARIOS = {"steady": steady, "burst": burst, "throughput": throughput}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--processes", default="1,2,4", help="web process counts")
    parser.add_argument("--seconds", type=float, default=20, help="steady: duration")
    options = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        emit(
            bench="web_processes",
            backend="sqlite",
            note="several web processes need PostgreSQL (NOTIFY/LISTEN wake-ups); "
            "set DATABASE_URL=postgres://...",
            met=None,
        )
        return
    url = prepare_database()
    workdir = Path(tempfile.mkdtemp(prefix="croniq-web-processes-bench-"))
    counts = [int(n) for n in options.processes.split(",")]
    try:
        # Scenario by scenario, so the process counts compared are measured
        # minutes apart, under about the same load.
        for name in options.only.split(","):
            for processes in counts:
                load_before = os.getloadavg()[0]
                figures = SCENARIOS[name](url, workdir, processes, options)
                emit(
                    bench="web_processes",
                    scenario=name,
                    backend="postgresql",
                    processes=processes,
                    **figures,
                    load_average_before=load_before,
                    load_average=os.getloadavg()[0],
                )
    finally:
        drop_database(url)


if __name__ == "__main__":
    main()
