"""Django's SQLite backend, where a connection may take the write lock eagerly.

SQLite has one writer at a time. A connection that finds the write lock
taken sleeps in SQLite's busy handler, whose sleeps grow to 100 ms; against a
process that commits many short transactions (the notifier in a burst) such a
writer loses the race round after round. The scheduler loop's tick went from
a p99 of 22 ms to 1.5 s during a burst of 1,000 notifications
(bench/notifications.py).

A connection marked `eager_write_lock` instead asks again every EAGER_RETRY
seconds when it begins a transaction, so it takes the lock within a fraction
of a millisecond of its release. The loop marks its own connection: what it
does is on the clock, the notifier's deliveries are not. Every other
connection waits as before.

A framework override (core/framework_overrides.py): it replaces Django's
private `_start_transaction_under_autocommit`. With CRONIQ_STOCK_DJANGO
naming `sqlite_write_lock`, or on a Django release it has not been verified
with, an eager connection begins its transactions as Django does and waits
in the busy handler like any other.

Its features ask SQLite whether it has JSON outside a transaction
(DatabaseFeatures below): a backend's own features, not an override.
"""

import time

from django.db import OperationalError
from django.db.backends.sqlite3 import base, features
from django.utils.functional import cached_property

from core.framework_overrides import in_use

EAGER_RETRY = 0.0005  # seconds between two tries for the write lock


class DatabaseFeatures(features.DatabaseFeatures):
    @cached_property
    def supports_json_field(self) -> bool:
        """Django asks inside a transaction, which under `transaction_mode`
        IMMEDIATE waits for the write lock. From Django 6.1 every command's
        model checks ask (`fields.E180`), so a command started while another
        process held the lock past the busy timeout stopped on "SQLite does
        not support JSONFields". A read needs no lock, and a failed one
        leaves no transaction to spoil."""
        with self.connection.cursor() as cursor:
            try:
                cursor.execute('SELECT JSON(\'{"a": "b"}\')')
            except OperationalError:
                return False
        return True


class DatabaseWrapper(base.DatabaseWrapper):
    features_class = DatabaseFeatures
    eager_write_lock = False
    # (raw connection, its busy timeout): read once per connection.
    _patience = (None, None)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.eager_allowed = in_use("sqlite_write_lock")

    def _start_transaction_under_autocommit(self):
        if not (self.eager_write_lock and self.eager_allowed):
            return super()._start_transaction_under_autocommit()
        patience = self.busy_timeout()  # connects first: the mode is read then
        begin = f"BEGIN {self.transaction_mode or 'IMMEDIATE'}"
        deadline = time.monotonic() + patience / 1000
        cursor = self.cursor()
        # The busy handler is switched off and back on through the raw
        # connection: settings of the connection, a few microseconds each,
        # where Django's cursor made them two more statements a transaction.
        raw = self.connection
        raw.execute("PRAGMA busy_timeout = 0")  # a taken lock answers at once
        try:
            while True:
                try:
                    cursor.execute(begin)
                    return None
                except OperationalError as e:
                    if "locked" not in str(e) or time.monotonic() >= deadline:
                        raise
                time.sleep(EAGER_RETRY)
        finally:
            raw.execute(f"PRAGMA busy_timeout = {patience}")

    def busy_timeout(self) -> int:
        """The connection's busy timeout (ms), as its settings set it (read
        on its first eager transaction)."""
        self.ensure_connection()
        raw, patience = self._patience
        if raw is not self.connection:
            patience = self.connection.execute("PRAGMA busy_timeout").fetchone()[0]
            self._patience = (self.connection, patience)
        return patience
