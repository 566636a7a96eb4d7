"""How soon a waiter wakes: the figures behind what the tests assert.

The tests say what woke a waiter (a commit, a NOTIFY, a released write lock,
a try's deadline), against alternatives made far longer; how soon it woke
is measured here, on a machine that is not running the suite. JSON lines,
p50/p99/max in milliseconds over `--samples`:

- commit_wake (SQLite): another connection's commit to the return of a
  watcher blocked on the database's writes (core.commits, Linux); from
  the INSERT's start.
- listener_wake: the same commit to the process's listener's subscriber
  (core.wakeups) on SQLite; a NOTIFY from another connection on PostgreSQL.
- eager_write_lock (SQLite): from the holder's COMMIT to an eager
  connection holding the write lock (croniq_project/sqlite), beside a plain
  BEGIN IMMEDIATE that waits in SQLite's busy handler.
- deadline (no database, with the SQLite run): a receiver that drips its
  answer's headers a byte every 0.3 s, a webhook with a 1 s timeout: how
  far past the timeout the try ended (notifications.egress).

Targets (p99), the bounds the tests held before they ran on loaded CI
machines: commit_wake and listener_wake 200 ms, an eager write lock 20 ms
(the plain one is for comparison), a deadline 500 ms past the timeout.

    .venv/bin/python bench/wakeups.py            # SQLite, temporary files
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/wakeups.py        # listener_wake on a fresh database, dropped after

Options: --samples N (default 50)
"""

import argparse
import contextlib
import os
import socket
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tick import emit, setup_database  # noqa: E402 (bench/ is on sys.path)

CHANNEL = "croniq_bench_wakeups"
DRIP_PACE = 0.3  # seconds between the dripping receiver's bytes
DEADLINE_TIMEOUT = 1.0
DEADLINE_SAMPLES = 5  # each takes the timeout
TARGET_P99_MS = {"commit_wake": 200, "listener_wake": 200, "eager_write_lock": 20, "deadline": 500}


def figures(name, seconds, target=True, **fields):
    """A figure's line; `target` false: for comparison only."""
    ms = sorted(value * 1000 for value in seconds)
    p99 = ms[min(len(ms) - 1, round(0.99 * len(ms)) - 1)]
    target_ms = TARGET_P99_MS[name] if target else None
    emit(
        bench=name,
        **fields,
        samples=len(ms),
        p50_ms=round(statistics.median(ms), 3),
        p99_ms=round(p99, 3),
        max_ms=round(ms[-1], 3),
        load_average=round(os.getloadavg()[0], 2),
        target_ms=target_ms,
        met=None if target_ms is None else p99 <= target_ms,
    )


def sqlite_file(directory, name):
    path = Path(directory) / name
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x)")
    return path, writer


def commit_later(writer, started):
    """A commit of `writer` in 20 ms, its start put in `started`."""

    def commit():
        started.append(time.perf_counter())
        writer.execute("INSERT INTO t VALUES (1)")

    timer = threading.Timer(0.02, commit)
    timer.start()
    return timer


def commit_wake(directory, samples):
    from core import commits

    path, writer = sqlite_file(directory, "commits.sqlite3")
    watcher = commits.own_connection(str(path))
    if not watcher.blocks:
        emit(bench="commit_wake", skipped="the database's writes cannot be watched here")
        return
    watcher.wait(5.0)  # the first look: moved
    took = []
    for _ in range(samples):
        started = []
        timer = commit_later(writer, started)
        assert watcher.wait(30.0)
        took.append(time.perf_counter() - started[0])
        timer.join()
    watcher.close()
    writer.close()
    figures("commit_wake", took)


def listener_wake(directory, samples, backend):
    from core import db, wakeups

    woken = threading.Event()
    times = []

    def wake():
        times.append(time.perf_counter())
        woken.set()

    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            path, writer = sqlite_file(directory, "listened.sqlite3")
            stack.callback(writer.close)
            listener = wakeups.CommitListener(path)
            if not listener.delivers:
                emit(bench="listener_wake", skipped="the database's writes cannot be watched")
                return

            def poke():
                started = []
                commit_later(writer, started).join()
                return started[0]

        else:
            listener = wakeups.listener()
            other = stack.enter_context(db.listen_connection())

            def poke():
                time.sleep(0.02)
                started = time.perf_counter()
                other.execute(f"NOTIFY {CHANNEL}")
                return started

        up = threading.Event()
        subscription = listener.subscribe(CHANNEL, wake, lambda connected: connected and up.set())
        stack.callback(subscription.cancel)
        assert up.wait(30) and woken.wait(30)  # coming up wakes it once
        took = []
        for _ in range(samples):
            woken.clear()
            started = poke()
            assert woken.wait(30)
            took.append(times[-1] - started)
    figures("listener_wake", took, wakes_by="commit" if backend == "sqlite" else "NOTIFY")


def hold_write_lock(holder, taken, committing):
    """Take the write lock, set `taken`, hold it 20 ms and commit; the
    COMMIT's start goes into `committing`."""
    with holder.cursor() as cursor:
        cursor.execute("BEGIN IMMEDIATE")
        taken.set()
        time.sleep(0.02)
        committing.append(time.perf_counter())
        cursor.execute("COMMIT")


def eager_write_lock(directory, samples):
    from django.db.utils import ConnectionHandler

    from croniq_project.database import database_from_url

    config = database_from_url(f"sqlite:///{directory}/locks.sqlite3")
    handler = ConnectionHandler({"default": dict(config), "other": dict(config)})
    holder, waiter = handler["default"], handler["other"]
    holder.inc_thread_sharing()  # opened here, used by the holding threads
    waiter.eager_write_lock = True
    for kind in ("eager", "plain"):
        took = []
        for _ in range(samples):
            taken, committing = threading.Event(), []
            thread = threading.Thread(target=hold_write_lock, args=(holder, taken, committing))
            thread.start()
            taken.wait(30)
            if kind == "eager":
                waiter._start_transaction_under_autocommit()  # what atomic() calls
            else:
                waiter.cursor().execute("BEGIN IMMEDIATE")  # SQLite's busy handler
            took.append(time.perf_counter() - committing[0])
            waiter.cursor().execute("COMMIT")
            thread.join()
        figures("eager_write_lock", took, target=kind == "eager", waiter=kind)
    holder.close()
    waiter.close()


def dripper():
    """A receiver that reads a request, then drips its answer's headers a
    byte every DRIP_PACE until the client hangs up; its URL."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            connection, _ = server.accept()
            with connection:
                connection.recv(65536)
                try:
                    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000:
                        time.sleep(DRIP_PACE)
                        connection.sendall(bytes([byte]))
                except OSError:
                    pass  # the sender gave up

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}/hook"


def deadline():
    from notifications import channels

    url = dripper()
    message = {"id": "bench", "event": "test", "summary": "bench", "url": "https://croniq.test/"}
    past = []
    for _ in range(DEADLINE_SAMPLES):
        started = time.perf_counter()
        result = channels.send(
            "webhook", {"url": url, "timeout": DEADLINE_TIMEOUT}, message, now=time.time()
        )
        assert result.error == f"timed out after {DEADLINE_TIMEOUT}s", result
        past.append(time.perf_counter() - started - DEADLINE_TIMEOUT)
    figures("deadline", past, timeout_s=DEADLINE_TIMEOUT, drip_every_s=DRIP_PACE)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    backend, cleanup = setup_database()
    os.environ.setdefault("SECRET_KEY", "bench")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    os.environ["CRONIQ_NOTIFY_ALLOW_NETS"] = "127.0.0.0/8"  # the dripping receiver's
    import django

    django.setup()
    try:
        with tempfile.TemporaryDirectory() as directory:
            if backend == "sqlite":
                commit_wake(directory, args.samples)
                eager_write_lock(directory, args.samples)
                deadline()
            listener_wake(directory, args.samples, backend)
    finally:
        cleanup()


if __name__ == "__main__":
    main()
