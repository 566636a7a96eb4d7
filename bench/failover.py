"""Seconds from killing the PostgreSQL primary to the first fire and the first
dispatch on the promoted standby, and the runs lost or doubled (both must
be 0), with real processes (harness/failover.py: a web server, a scheduler
loop and an agent on the multi-host URL of a primary and its synchronous
standby; the primary is SIGKILLed while a job runs across it, and the
standby promoted after the outage).

    .venv/bin/python bench/failover.py                       # needs PostgreSQL's binaries
    .venv/bin/python bench/failover.py --outages 0,10,30 --runs 2

`--outages`: seconds from the kill to the promotion, one scenario each
(default 0 and 20). 0 promotes as soon as the scheduler loop has seen the
primary gone; 20 is a failover manager's detection time (Patroni's `ttl`
plus `loop_wait` is 10 to 30 s), where the processes' retry pauses have
grown. The pair is private to the bench (two servers of its own on free
ports), so DATABASE_URL is not used; without a postgres:// DATABASE_URL
(run_all's SQLite pass) it prints one line saying it runs in the
PostgreSQL pass. Target: the first fire and the first dispatch within
15 s of the promotion, nothing lost, nothing doubled. Each run takes one
to two minutes on a loaded 2-core machine.
"""

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dispatch_latency import emit  # noqa: E402

TARGET_SECONDS = 15.0


def measure(outage: float, number: int, unreachable: bool) -> dict:
    from harness import failover

    workdir = Path(tempfile.mkdtemp(prefix="croniq-failover-bench-"))
    outcome = failover.run(workdir, outage=outage, unreachable=unreachable)
    promoted = outcome.promoted_after
    line = dict(
        bench="failover",
        backend="postgresql",
        scenario=f"outage {outage:g}s" + (", machine lost" if unreachable else ""),
        run=number,
        kill_to_promoted_s=round(promoted, 2),
        kill_to_first_fire_s=round(outcome.first_fire, 2),
        kill_to_first_dispatch_s=round(outcome.first_dispatch, 2),
        promoted_to_first_fire_s=round(outcome.first_fire - promoted, 2),
        promoted_to_first_dispatch_s=round(outcome.first_dispatch - promoted, 2),
        instants=outcome.instants,
        finishes_acknowledged_before=len(outcome.acknowledged),
        runs_lost=len(outcome.lost),
        runs_doubled=len(outcome.doubled),
        executions_started_twice=len(outcome.started_twice),
        finishes_missing=len(outcome.missing) + len(outcome.unsettled),
        load_average=round(os.getloadavg()[0], 2),
        target=f"first fire and dispatch <= {TARGET_SECONDS:g} s after the promotion, "
        "0 lost, 0 doubled",
    )
    line["met"] = (
        max(outcome.first_fire, outcome.first_dispatch) - promoted <= TARGET_SECONDS
        and not outcome.violations()
    )
    for violation in outcome.violations():
        print(f"  {violation}", file=sys.stderr)
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--outages",
        type=lambda text: [float(n) for n in text.split(",")],
        default=[0.0, 20.0],
        help="seconds from the kill to the promotion, one scenario each (default 0,20)",
    )
    parser.add_argument("--runs", type=int, default=1, help="runs of each scenario (default 1)")
    parser.add_argument(
        "--unreachable",
        action="store_true",
        help="the primary's machine is lost (its packets dropped: iptables, as root), "
        "not only its server",
    )
    options = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        emit(bench="failover", backend="sqlite", skipped="runs in the PostgreSQL pass", met=None)
        return 0
    # Django for the harness (it reads settings); the pair is the bench's own.
    os.environ.setdefault("SECRET_KEY", "croniq-bench-key")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    import django

    django.setup()
    from harness.private_postgres import postgres_bin

    if postgres_bin() is None:
        emit(bench="failover", skipped="PostgreSQL server binaries not installed", met=None)
        return 0
    lines = []
    for outage in options.outages:
        for number in range(1, options.runs + 1):
            lines.append(measure(outage, number, options.unreachable))
            emit(**lines[-1])
    fires = [line["promoted_to_first_fire_s"] for line in lines]
    dispatches = [line["promoted_to_first_dispatch_s"] for line in lines]
    emit(
        bench="failover",
        backend="postgresql",
        scenario="summary",
        runs=len(lines),
        promoted_to_first_fire_median_s=statistics.median(fires),
        promoted_to_first_fire_max_s=max(fires),
        promoted_to_first_dispatch_median_s=statistics.median(dispatches),
        promoted_to_first_dispatch_max_s=max(dispatches),
        runs_lost=sum(line["runs_lost"] for line in lines),
        runs_doubled=sum(line["runs_doubled"] for line in lines),
        met=all(line["met"] for line in lines),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
