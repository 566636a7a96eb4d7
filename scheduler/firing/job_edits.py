"""How a sleeping scheduler loop learns that a job was saved.

The loop sleeps until its earliest due job, at most its interval; a job
saved meanwhile may be due sooner. The loop then reads the jobs' edit marker
(`ticks.last_job_edit`, a MAX over the job table) and ticks if it moved.
It reads the marker only when something may have changed
(`watcher(connection).moved()`):

- SQLite: another connection committed (`core.commits`); the loop
  blocks until the database's log is written (Linux), elsewhere it looks
  every EDIT_CHECK_INTERVAL (scheduler.firing.loop);
- PostgreSQL: a NOTIFY on CHANNEL reached the process's listener
  (`core.wakeups`); `Job.save` sends one at its commit (`saved`). The loop
  blocks on its subscription's pipe until one comes (`Listening.wait`).

A hint lost (a new connection, a writer that does not notify) costs at most
one interval: each tick reads the earliest due job anew.
"""

import select
import threading
from typing import Any

from django.db import connection, transaction

from core import commits, db, wakeups

CHANNEL = "croniq_jobs"
# How long a loop's first look waits for its subscription to come up (the
# listener connecting); a hint missed meanwhile costs at most one interval.
SUBSCRIBE_PATIENCE = 2.0


def saved() -> None:
    """A job was saved on the default connection: on PostgreSQL, NOTIFY the
    sleeping loops at the commit (once per transaction, however many jobs)."""
    if not db.on_postgres():
        return
    if not connection.in_atomic_block:
        notify()
    elif not any(entry[1] is notify for entry in connection.run_on_commit):
        transaction.on_commit(notify)


def notify() -> None:
    db.notify(CHANNEL)


class Listening:
    """PostgreSQL: `moved()` is true when a NOTIFY on CHANNEL came since
    the last call, and once the subscription is up (what was saved before
    is unknown). The hints come through the process's listener
    (`core.wakeups`), not the loop's own connection, which may be pooled."""

    blocks = True  # `wait` blocks until a hint comes
    # A NOTIFY is a job saved: no need to read the jobs' edit marker.
    reads_marker = False

    def __init__(self) -> None:
        self.flag = None
        self.subscription = None

    def subscribe(self) -> bool:
        """Subscribe on first use, and wait (at most SUBSCRIBE_PATIENCE) until
        hints reach it: True then, as what was saved before is unknown."""
        if self.subscription is not None:
            return False
        self.flag = wakeups.Flag()
        up = threading.Event()
        self.subscription = wakeups.listener().subscribe(
            CHANNEL, self.flag.set, lambda connected: connected and up.set()
        )
        if up.wait(SUBSCRIBE_PATIENCE):
            self.flag.clear()  # the wake-up of its coming up: this look's
        return True

    def forget_writes(self) -> None:
        """Nothing to forget: its own commits send no NOTIFY."""

    def moved(self) -> bool:
        return self.subscribe() or self.flag.clear()

    def wait(self, seconds: float, interrupt: int) -> bool:
        """Block until a NOTIFY may have come (True), or until `seconds`
        passed or the file descriptor `interrupt` is readable (False).
        Nothing runs while nothing happens: no look every few milliseconds."""
        if self.moved():
            return True
        readable, _, _ = select.select([self.flag, interrupt], [], [], max(0.0, seconds))
        return self.flag in readable and self.moved()

    def close(self) -> None:
        if self.subscription is not None:
            self.subscription.cancel()
            self.flag.close()
            self.subscription = self.flag = None


def watcher(connection: Any) -> Any:
    """What tells the loop, on `connection`, that a job may have been saved."""
    if db.on_postgres(connection.alias):
        return Listening()
    return commits.of_django(connection)
