"""How a sleeping scheduler loop learns that a job was saved.

The loop sleeps until its earliest due job, at most its interval; a job
saved meanwhile may be due sooner. The loop then reads the jobs' edit marker
(`ticks.last_job_edit`, a MAX over the job table) and ticks if it moved.
It reads the marker only when something may have changed
(`watcher(connection).moved()`). The loop blocks on a subscription to the
process's listener (`core.wakeups`) until a hint comes (`Listening.wait`):

- PostgreSQL: a NOTIFY on CHANNEL; `Job.save` sends one at its commit
  (`saved`).
- SQLite: a commit of any connection (the listener blocks until the
  database's log is written, Linux); the loop's own connection then tells
  whether another one committed (`core.commits`), so its own ticks' commits
  cost no read of the marker. Where the listener cannot watch the writes
  (not Linux, an in-memory database) the loop looks for commits every
  EDIT_CHECK_INTERVAL (scheduler.firing.loop).

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
# SQLite: every other connection's commit is a hint, and each costs a read
# of the jobs' edit marker; under a flood of commits that are no job's
# (a thousand pings a second) the loop is woken at most this often, so a
# job saved then is seen within 50 ms, and at once after a quiet moment.
COMMIT_LOOK_EVERY = 0.05


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
    """`moved()` is true when a hint came since the last call, and once the
    subscription is up (what was saved before is unknown). The hints come
    through the process's listener (`core.wakeups`), not the loop's own
    connection, which may be pooled.

    PostgreSQL: a hint is a NOTIFY on CHANNEL, a job saved. SQLite (given
    `commits`, the loop connection's): a hint is any commit, the loop's
    own among them, so `moved()` asks `commits` whether another connection
    committed, and the loop reads the jobs' edit marker to know whether it
    saved a job."""

    blocks = True  # `wait` blocks until a hint comes

    def __init__(self, commits: "commits.Commits | None" = None) -> None:
        self.flag = None
        self.subscription = None
        self.commits = commits

    @property
    def reads_marker(self) -> bool:
        # A NOTIFY is a job saved: no need to read the jobs' edit marker.
        return self.commits is not None

    def subscribe(self) -> bool:
        """Subscribe on first use, and wait (at most SUBSCRIBE_PATIENCE) until
        hints reach it: True then, as what was saved before is unknown."""
        if self.subscription is not None:
            return False
        self.flag = wakeups.Flag()
        up = threading.Event()
        self.subscription = wakeups.listener().subscribe(
            CHANNEL,
            self.flag.set,
            lambda connected: connected and up.set(),
            every=COMMIT_LOOK_EVERY if self.commits is not None else None,
        )
        if up.wait(SUBSCRIBE_PATIENCE):
            self.flag.clear()  # the wake-up of its coming up: this look's
        return True

    def forget_writes(self) -> None:
        """Drop the hints of the loop's own commits, just made (SQLite; its
        own commits send no NOTIFY). Another connection's among them is
        still seen: `moved()` asks the loop's connection."""
        if self.flag is not None:
            self.flag.clear()

    def moved(self) -> bool:
        if self.subscribe():
            return True
        hinted = self.flag.clear()
        if self.commits is None:
            return hinted
        return self.commits.moved()  # 10 µs, whether hinted or not

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
    seen = commits.of_django(connection, watch=False)
    if wakeups.listener().delivers:
        return Listening(seen)
    return seen  # the loop looks in turn (`Commits.blocks` is false)
