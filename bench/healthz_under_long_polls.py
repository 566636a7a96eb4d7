"""/healthz while 200 runner long-polls wait on one web process.

Waiting polls must hold no thread the server needs: /healthz is timed 20
times while 200 polls (wait 8 s) wait for work that never comes. Prints one
JSON line with the median, p90 and max in ms. Targets: median < 50 ms,
p90 < 100 ms, max < 1 s. tests/e2e/test_protocol_load.py checks that
every poll is answered and, on PostgreSQL, that they hold no connection;
how fast /healthz answers meanwhile is measured here.

    .venv/bin/python bench/healthz_under_long_polls.py        # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_healthz_bench \
        .venv/bin/python bench/healthz_under_long_polls.py    # a fresh database, dropped after
"""

import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The dispatch latency bench's database set-up and helpers (bench/ is on sys.path).
from dispatch_latency import backend, drop_database, emit, new_token, percentile, prepare_database  # noqa: E402

POLLS = 200
WAIT = 8
SAMPLES = 20
TARGETS_MS = {"median": 50, "p90": 100, "max": 1000}


def register(http, url, secret):
    body = {"name": f"bench-{uuid.uuid4().hex[:8]}", "labels": ["linux"], "session": "s"}
    answer = http.post(f"{url}/api/v1/runners/register", json=body, headers=bearer(secret))
    answer.raise_for_status()
    return answer.json()["runner_id"]


def bearer(secret):
    return {"Authorization": f"Bearer {secret}"}


def healthz_timings(url, secret):
    import requests

    http = requests.Session()
    runner = register(http, url, secret)
    answered = []

    def wait_for_work():
        body = {"session": "s", "wait": WAIT, "capacity": 1}
        poll = f"{url}/api/v1/runners/{runner}/poll"
        answered.append(requests.post(poll, json=body, headers=bearer(secret), timeout=70))

    pollers = [threading.Thread(target=wait_for_work) for _ in range(POLLS)]
    for poller in pollers:
        poller.start()
    time.sleep(3)  # every poll has done its claim and waits now
    timings = []
    for _ in range(SAMPLES):
        started = time.perf_counter()
        requests.get(f"{url}/healthz", timeout=5).raise_for_status()
        timings.append(time.perf_counter() - started)
        time.sleep(0.05)
    for poller in pollers:
        poller.join(WAIT + 20)
    return timings, sum(1 for a in answered if a.status_code == 200)


def main():
    url = prepare_database()
    from harness.processes import Server

    workdir = Path(tempfile.mkdtemp(prefix="croniq-healthz-bench-"))
    web = Server(url, workdir / "web.log").wait_ready()
    try:
        timings, answered = healthz_timings(web.url, new_token())
    finally:
        web.stop()
        drop_database(url)
    figures = {
        "median": statistics.median(timings) * 1000,
        "p90": percentile(timings, 90) * 1000,
        "max": max(timings) * 1000,
    }
    emit(
        bench="healthz_under_long_polls",
        backend=backend(url),
        polls=POLLS,
        polls_answered=answered,
        **{f"{name}_ms": round(value, 2) for name, value in figures.items()},
        target=", ".join(f"{name} < {limit}" for name, limit in TARGETS_MS.items()),
        unit="ms",
        met=all(figures[name] < TARGETS_MS[name] for name in TARGETS_MS),
    )


if __name__ == "__main__":
    main()
