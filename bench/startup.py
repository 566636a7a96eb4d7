"""What starting a Croniq process costs: CPU seconds (user + system) from
exec to done, the median of `--runs` starts each.

- `shell`: `manage.py shell -c pass`, Django set up and nothing else.
- `create_runner_token`, `create_api_key`: minting a credential.
- `check`: `manage.py check`, the system checks (the URLconf, the
  management API's schemas, every check).
- `loop_once`: `manage.py scheduler_loop --once`, checks and one tick.
- `web`: uvicorn until /healthz answers.

Every process of a deployment and of the end-to-end tests pays these: the
test suite alone starts about 800 of them.

    .venv/bin/python bench/startup.py            # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_startup_bench \\
        .venv/bin/python bench/startup.py        # a fresh database, dropped after
"""

import argparse
import resource
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dispatch_latency import (  # noqa: E402
    backend,
    cpu_seconds,
    drop_database,
    emit,
    prepare_database,
)

from harness.processes import Server, manage  # noqa: E402


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command_cpu(url: str, *args: str) -> float:
    """CPU seconds of one `manage.py ARGS` run to its exit."""
    before = children_cpu()
    manage(url, *args)
    return children_cpu() - before


def web_cpu(url: str, workdir: Path) -> float:
    """CPU seconds of a uvicorn process from exec until /healthz answers."""
    server = Server(url, workdir / f"web-{uuid.uuid4().hex[:6]}.log").wait_ready()
    try:
        return cpu_seconds(server.popen.pid)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    url = prepare_database()
    workdir = Path(tempfile.mkdtemp(prefix="croniq-startup-"))
    starts = {
        "shell": lambda: command_cpu(url, "shell", "-c", "pass"),
        "create_runner_token": lambda: command_cpu(
            url, "create_runner_token", f"bench-{uuid.uuid4().hex[:8]}"
        ),
        "create_api_key": lambda: command_cpu(
            url, "create_api_key", f"bench-{uuid.uuid4().hex[:8]}", "--scopes", "jobs:read"
        ),
        "check": lambda: command_cpu(url, "check"),
        "loop_once": lambda: command_cpu(url, "scheduler_loop", "--once"),
        "web": lambda: web_cpu(url, workdir),
    }
    try:
        for name, start in starts.items():
            seconds = [start() for _ in range(args.runs)]
            emit(
                bench="startup",
                process=name,
                backend=backend(url),
                runs=args.runs,
                cpu_seconds_median=round(statistics.median(seconds), 3),
                cpu_seconds_min=round(min(seconds), 3),
            )
    finally:
        if url.startswith("postgres"):
            drop_database(url)


if __name__ == "__main__":
    main()
