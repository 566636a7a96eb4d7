"""SQLite: has another connection committed since we last looked?

On SQLite the processes of one install share a file and cannot signal each
other, so a process that waits for another's writes looks at the database:
the loop for edited jobs, the notifier for new events, each web process for
new executions. `PRAGMA data_version` tells one connection whether any other
connection committed since its previous answer. It reads a counter in the
WAL index (about 10 µs, no table, no ORM), so the watchers ask it every few
tens of milliseconds and run their own query (the ORM's, a hundred times
dearer) only when it moved.

Where the kernel can say when a file is written (Linux's inotify), they do
not look every few tens of milliseconds: they block until the database's
write-ahead log (or the file itself) is written (`FileWrites`), then ask.
Each of those looks woke a process 10 to 20 times a second, at about
0.1 ms of CPU a wake-up on a virtual machine: an idle install on SQLite
took 2.4% of a core where PostgreSQL, whose waiters block on a socket,
took 0.9 (bench/idle_cost.py). Elsewhere (macOS, an in-memory database)
they look as before.
"""

import logging
import os
import select
import sqlite3
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("croniq.scheduler")


# After a write to the log, when a waiter looks again for the commit it
# belongs to (seconds, one after the other: 2.6 s in all). A commit is
# visible microseconds after its last write with `synchronous=NORMAL`
# (croniq_project.database), milliseconds with FULL (an fsync between),
# but on a busy machine the writer can be descheduled in between: with
# looks over 111 ms, one commit in a test run of the whole suite was not
# seen. A write that was no commit of another connection (the waiter's
# own, a checkpoint) costs these few looks.
SETTLE_PAUSES = (0.001, 0.01, 0.1, 0.5, 2.0)


class Commits:
    """`moved()`: true on the first call and whenever a connection other
    than the watching one committed since the previous call (or when it
    cannot tell: then the caller looks, as it would without this).

    `connect()` returns the raw sqlite3 connection to watch with; a new one
    (the old was closed) counts as moved.
    """

    # Another connection's commit may be anything: the loop reads the jobs'
    # edit marker to know whether it saved a job (`scheduler.firing.job_edits`).
    reads_marker = True

    def __init__(self, connect: Callable[[], Any], writes: "FileWrites | None" = None) -> None:
        self.connect = connect
        self.seen = None
        self.writes = writes  # FileWrites of the database, or None
        # The SETTLE_PAUSES left after the last write: a wait that ends
        # first (its `seconds`, an interrupt) leaves them to the next.
        self.pauses = iter(())

    @property
    def blocks(self) -> bool:
        """Whether `wait` blocks until a write (else callers look in turn)."""
        return self.writes is not None

    def forget_writes(self) -> None:
        """Drop the writes seen so far: the waiter's own commits, just made
        (a commit of another connection among them is visible by now, and
        the next look sees it)."""
        if self.writes is not None:
            self.writes.clear()

    def close(self) -> None:
        if self.writes is not None:
            self.writes.close()
            self.writes = None

    def wait(self, seconds: float, interrupt: int | None = None) -> bool:
        """Block until another connection may have committed (True), or
        until `seconds` passed or the file descriptor `interrupt` is
        readable (False). Only when `blocks`."""
        deadline = time.monotonic() + seconds
        waited = [self.writes] if interrupt is None else [self.writes, interrupt]
        while not self.moved():
            left = max(0.0, deadline - time.monotonic())
            pause = next(self.pauses, None)
            readable, _, _ = select.select(
                waited, [], [], left if pause is None else min(left, pause)
            )
            if interrupt in readable or (not readable and pause is None) or left <= 0:
                return False
            if self.writes in readable:
                # The events are read before the next look: a commit after
                # it leaves one behind. Its commit becomes visible a moment
                # after the log is written (SQLite updates the log's index
                # then): look again after each of SETTLE_PAUSES.
                self.writes.clear()
                self.pauses = iter(SETTLE_PAUSES)
        self.pauses = iter(())  # its commit was seen
        return True

    def moved(self) -> bool:
        try:
            raw = self.connect()
            now = (raw, raw.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error:
            self.seen = None
            return True
        moved = now != self.seen
        self.seen = now
        return moved


class FileWrites:
    """Linux: a file descriptor that becomes readable when the SQLite
    database `path` or its write-ahead log is written, whoever writes it
    (inotify, on the directory: the log is deleted when the last connection
    closes and made anew by the next). `clear()` reads what came.

    A commit in WAL mode appends to the log with write(); readers only map
    its index (the -shm file), which inotify does not report: at rest, a
    watcher wakes when someone commits, and only then.
    """

    def __init__(self, path: str) -> None:
        from inotify_simple import INotify, flags

        directory, name = os.path.split(os.path.abspath(path))
        self.names = {name, f"{name}-wal"}
        self.overflow = flags.Q_OVERFLOW
        self.inotify = INotify(nonblocking=True)
        try:
            self.inotify.add_watch(directory, flags.MODIFY)
        except OSError:
            self.inotify.close()
            raise

    def fileno(self) -> int:
        return self.inotify.fileno()

    def clear(self) -> bool:
        """Read the events that came; whether one was the database's (or
        events were lost: the kernel's queue overflowed)."""
        try:
            events = self.inotify.read(timeout=0)
        except BlockingIOError:
            return False
        return any(e.name in self.names or e.mask & self.overflow for e in events)

    def close(self) -> None:
        self.inotify.close()


def file_writes(name: Any) -> FileWrites | None:
    """FileWrites for the database file `name` (Django's NAME), or None
    where it cannot be had: not Linux, an in-memory database, no inotify
    watch left (the kernel's per-user limit). Callers then look in turn."""
    name = str(name)
    if name.startswith("file:") or name == ":memory:" or not os.path.exists(name):
        return None
    try:
        return FileWrites(name)
    except (ImportError, OSError, AttributeError) as error:
        log.info("SQLite: looking for commits in turn (%s)", error)
        return None


def of_django(connection: Any, watch: bool = True) -> Commits:
    """Commits seen by a Django connection (the loop's own): its own
    commits do not count, every other connection's do. `watch=False`: no
    FileWrites (the caller only looks in turn)."""

    def raw():
        connection.ensure_connection()
        return connection.connection

    writes = file_writes(connection.settings_dict["NAME"]) if watch else None
    return Commits(raw, writes)


def own_connection(name: Any) -> Commits:
    """Commits seen by a raw connection of its own to the database file
    `name` (Django's NAME), opened on first use: for an asyncio event loop,
    which must not block on Django's connection. It never waits for a lock
    (a busy answer counts as moved)."""
    opened = []

    def raw():
        if not opened:
            uri = str(name).startswith("file:")
            opened.append(
                sqlite3.connect(
                    name, uri=uri, timeout=0, isolation_level=None, check_same_thread=False
                )
            )
        return opened[0]

    return Commits(raw, file_writes(name))
