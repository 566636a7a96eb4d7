"""SQLite: has another connection committed since we last looked?

On SQLite the processes of one install share a file and cannot signal each
other, so a process that waits for another's writes looks at the database:
the loop for edited jobs, the notifier for new events, each web process for
new executions. `PRAGMA data_version` tells one connection whether any other
connection committed since its previous answer. It reads a counter in the
WAL index (about 10 µs, no table, no ORM), so the watchers ask it every few
tens of milliseconds and run their own query (the ORM's, a hundred times
dearer) only when it moved. An idle install commits about once a second
(the loop's heartbeat), so that is how often they look.
"""

import sqlite3


class Commits:
    """`moved()`: true on the first call and whenever a connection other
    than the watching one committed since the previous call (or when it
    cannot tell: then the caller looks, as it would without this).

    `connect()` returns the raw sqlite3 connection to watch with; a new one
    (the old was closed) counts as moved.
    """

    def __init__(self, connect):
        self.connect = connect
        self.seen = None

    def moved(self):
        try:
            raw = self.connect()
            now = (raw, raw.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error:
            self.seen = None
            return True
        moved = now != self.seen
        self.seen = now
        return moved


def of_django(connection):
    """Commits seen by a Django connection (the loop's own): its own
    commits do not count, every other connection's do."""

    def raw():
        connection.ensure_connection()
        return connection.connection

    return Commits(raw)


def own_connection(name):
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

    return Commits(raw)
