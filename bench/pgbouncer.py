"""Dispatch latency straight to PostgreSQL and through PgBouncer in
transaction pooling mode, in one run (docs/design.md §16).

The steady scenario of bench/dispatch_latency.py (jobs `@every 1s`, runners
in long-poll, real uvicorn and scheduler_loop) in these setups, one after
the other, `--rounds` times:

- direct: DATABASE_URL is the server.
- pgbouncer: DATABASE_URL through PgBouncer (harness/pgbouncer.py),
  CRONIQ_LISTEN_DATABASE_URL the server.
- pgbouncer_listen_pooled (with --listen-pooled): both through PgBouncer,
  as before CRONIQ_LISTEN_DATABASE_URL: the LISTEN hears nothing.

Prints one JSON line per run and one comparing the setups (the median of
their runs' p50 and p99). Target: through the pooler, p99 within 5 ms of
direct.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_pgbouncer_bench \\
        .venv/bin/python bench/pgbouncer.py [--seconds 20] [--jobs 30] [--runners 10]
"""

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from dispatch_latency import drop_database, emit, prepare_database, steady_figures  # noqa: E402

TARGET_MS = 5.0


def setups(url, pooled_url, listen_pooled):
    """(name, DATABASE_URL of the processes, their extra environment)."""
    chosen = [
        ("direct", url, {}),
        ("pgbouncer", pooled_url, {"CRONIQ_LISTEN_DATABASE_URL": url}),
    ]
    if listen_pooled:
        chosen.append(("pgbouncer_listen_pooled", pooled_url, {}))
    return chosen


def run(args, url, workdir):
    from harness.pgbouncer import pgbouncer

    results = {}
    with pgbouncer(url) as bouncer:
        pooled_url = bouncer.url_for(url)
        for round_number in range(1, args.rounds + 1):
            for name, database_url, env in setups(url, pooled_url, args.listen_pooled):
                figures = steady_figures(
                    database_url,
                    workdir,
                    args.seconds,
                    jobs=args.jobs,
                    runners=args.runners,
                    env=env,
                )
                emit(
                    bench="dispatch_pgbouncer",
                    setup=name,
                    round=round_number,
                    jobs=args.jobs,
                    runners=args.runners,
                    **figures,
                    load_average=os.getloadavg()[0],
                )
                results.setdefault(name, []).append(figures)
    return results


def compare(results):
    """The setups' p50/p99 (the median over rounds) and the pooler's p99 against direct's."""
    summary = {}
    for name, runs in results.items():
        summary[name] = {
            "p50_ms": median([run["p50_ms"] for run in runs]),
            "p99_ms": median([run["p99_ms"] for run in runs]),
        }
    difference = summary["pgbouncer"]["p99_ms"] - summary["direct"]["p99_ms"]
    emit(
        bench="dispatch_pgbouncer_compare",
        **{f"{name}_{key}": value for name, row in summary.items() for key, value in row.items()},
        p99_over_direct_ms=round(difference, 2),
        load_average=os.getloadavg()[0],
        target=f"pgbouncer p99 within {TARGET_MS:g} ms of direct",
        met=difference <= TARGET_MS,
    )


def median(values):
    present = [value for value in values if value is not None]
    return round(statistics.median(present), 2) if present else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20, help="measured seconds per run")
    parser.add_argument("--jobs", type=int, default=30, help="jobs @every 1s")
    parser.add_argument("--runners", type=int, default=10, help="runners in long-poll")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each setup, alternating")
    parser.add_argument(
        "--listen-pooled", action="store_true", help="also LISTEN through the pooler (deaf)"
    )
    args = parser.parse_args()
    url = prepare_database()
    if not url.startswith("postgres"):
        parser.error("DATABASE_URL must name a PostgreSQL database (postgres://...)")
    workdir = Path(tempfile.mkdtemp(prefix="croniq-pgbouncer-bench-"))
    try:
        compare(run(args, url, workdir))
    finally:
        drop_database(url)


if __name__ == "__main__":
    main()
