"""How a sleeping scheduler loop learns that a job was saved.

The loop sleeps until its earliest due job, at most its interval; a job
saved meanwhile may be due sooner. The loop then reads the jobs' edit marker
(`ticks.last_job_edit`, a MAX over the job table) and ticks if it moved.
It reads the marker only when something may have changed
(`watcher(connection).moved()`):

- SQLite: another connection committed (`core.commits`); the loop
  blocks until the database's log is written (Linux), elsewhere it looks
  every EDIT_CHECK_INTERVAL (scheduler.firing.loop);
- PostgreSQL: a NOTIFY on CHANNEL reached the loop's connection, which
  listens; `Job.save` sends one at its commit (`saved`). The loop's process
  blocks on the connection's socket until one comes (`Listening.wait`).

A hint lost (a new connection, a writer that does not notify) costs at most
one interval: each tick reads the earliest due job anew.
"""

import select

from django.db import connection, transaction

from core import commits

CHANNEL = "croniq_jobs"


def saved():
    """A job was saved on the default connection: on PostgreSQL, NOTIFY the
    sleeping loops at the commit (once per transaction, however many jobs)."""
    if connection.vendor != "postgresql":
        return
    if not connection.in_atomic_block:
        notify()
    elif not any(entry[1] is notify for entry in connection.run_on_commit):
        transaction.on_commit(notify)


def notify():
    with connection.cursor() as cursor:
        cursor.execute(f"NOTIFY {CHANNEL}")


class Listening:
    """PostgreSQL: `moved()` is true when a NOTIFY on CHANNEL came since
    the last call, and on a new connection (it listens from then on)."""

    blocks = True  # `wait` blocks on the connection's socket
    # A NOTIFY is a job saved: no need to read the jobs' edit marker.
    reads_marker = False

    def __init__(self, connection):
        self.connection = connection
        self.listening = None

    def forget_writes(self):
        """Nothing to forget: its own commits send no NOTIFY to it."""

    def moved(self):
        self.connection.ensure_connection()
        raw = self.connection.connection
        if raw is not self.listening:
            with self.connection.cursor() as cursor:
                cursor.execute(f"LISTEN {CHANNEL}")
            self.listening = raw
            return True
        # What came during the ticks' queries waits in psycopg's backlog;
        # a timeout of 0 reads what the socket holds, no round trip. A lost
        # connection raises Django's error, which the loop waits out.
        with self.connection.wrap_database_errors:
            return any(True for _ in raw.notifies(timeout=0))

    def wait(self, seconds, interrupt):
        """Block until a NOTIFY may have come (True), or until `seconds`
        passed or the file descriptor `interrupt` is readable (False).
        Nothing runs while nothing happens: no look every few milliseconds."""
        if self.moved():
            return True
        socket = self.connection.connection.fileno()
        readable, _, _ = select.select([socket, interrupt], [], [], max(0.0, seconds))
        return socket in readable and self.moved()


def watcher(connection):
    """What tells the loop, on `connection`, that a job may have been saved."""
    if connection.vendor == "postgresql":
        return Listening(connection)
    return commits.of_django(connection)
