"""How long a web process takes to exit after SIGTERM with long-polls open.

For plain uvicorn (`uvicorn croniq_project.asgi:application`, as the
Dockerfile runs it) and `croniq-admin serve` (web and loop in one process),
with 0, 50 and 1,000 polls waiting (each its own runner and connection,
`wait` 60 s, for work that never comes): seconds from SIGTERM to the
process's exit, to the last poll's answer, and how many polls were answered
200 with no work and `stopping: true` (docs/design.md §4). Target: exit
within 2 s (docs/design.md §16). Prints one JSON line per case.

    .venv/bin/python bench/web_stop.py            # SQLite, a temporary file
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_web_stop_bench \
        .venv/bin/python bench/web_stop.py        # a fresh database, dropped after

Options: --polls 0,50,1000  --layouts uvicorn,serve
"""

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The dispatch bench's database set-up (bench/ is on sys.path).
from dispatch_latency import backend, drop_database, emit, prepare_database  # noqa: E402

POLLS = (0, 50, 1000)
LAYOUTS = ("uvicorn", "serve")
TARGET_SECONDS = 2.0
# Longest wait for the polls to reach the hub, and for the exit.
PATIENCE = 120


def start(layout, url, workdir):
    from harness.processes import OneProcess, Server

    if layout == "serve":
        return OneProcess(url, workdir / f"serve-{time.monotonic_ns()}.log").wait_ready(60)
    return Server(url, workdir / f"web-{time.monotonic_ns()}.log").wait_ready(60)


async def wait_until_waiting(url, idle):
    from harness.long_polls import polls_waiting

    deadline = time.monotonic() + PATIENCE
    while polls_waiting(url, idle) < len(idle.runners):
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {len(idle.runners)} polls reached the server")
        await asyncio.sleep(0.05)


async def stop_with_polls(server, url, count):
    """SIGTERM with `count` polls waiting: the figures of one case."""
    from harness.long_polls import idle_runners, open_polls

    polls = []
    if count:
        idle = idle_runners(url, count)
        polls = await open_polls(server.port, idle.secret, idle.runners)
        await wait_until_waiting(url, idle)
    answered_at = []

    async def answer(poll):
        status, _, body = await poll.answer()
        answered_at.append(time.monotonic())
        return status, body

    sent = time.monotonic()
    server.popen.send_signal(signal.SIGTERM)
    exit_code, *answers = await asyncio.gather(
        asyncio.to_thread(server.popen.wait, PATIENCE), *(answer(poll) for poll in polls)
    )
    seconds = time.monotonic() - sent
    for poll in polls:
        poll.close()
    empty = [
        body
        for status, body in answers
        if status == 200 and isinstance(body, dict) and body.get("executions") == []
    ]
    return dict(
        seconds=round(seconds, 3),
        last_answer_seconds=round(max(answered_at) - sent, 3) if answered_at else None,
        answered_200=len(empty),
        stopping=sum(1 for body in empty if body.get("stopping") is True),
        exit_code=exit_code,
    )


def forget_runners():
    """The case's runners go: silent from now on, they would all go offline
    together during a later case, and the loop's step marking them offline
    (seconds for a thousand on a busy machine) would hold `serve`'s exit,
    which waits for the loop's current step."""
    from runners.models import Runner, RunnerToken

    Runner.objects.all().delete()
    RunnerToken.objects.all().delete()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", default=",".join(map(str, POLLS)))
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    args = parser.parse_args()
    counts = [int(n) for n in args.polls.split(",")]
    from harness.long_polls import raise_open_file_limit

    raise_open_file_limit(max(counts))
    url = prepare_database()
    workdir = Path(tempfile.mkdtemp(prefix="croniq-web-stop-bench-"))
    try:
        for layout in args.layouts.split(","):
            for count in counts:
                server = start(layout, url, workdir)
                try:
                    figures = asyncio.run(stop_with_polls(server, url, count))
                finally:
                    server.stop()
                forget_runners()
                emit(
                    bench="web_stop",
                    scenario=layout,
                    backend=backend(url),
                    polls=count,
                    **figures,
                    load_average=round(os.getloadavg()[0], 2),
                    target=f"exit <= {TARGET_SECONDS} s, every poll answered 200 stopping",
                    met=figures["seconds"] <= TARGET_SECONDS and figures["stopping"] == count,
                )
    finally:
        drop_database(url)


if __name__ == "__main__":
    main()
