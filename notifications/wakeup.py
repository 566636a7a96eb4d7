"""Wake the notifier when an event commits, so a failure reaches its
receivers in milliseconds rather than at the next poll.

In the same process (`manage.py serve`, tests) a threading.Event, `local`;
across processes on PostgreSQL a NOTIFY on CHANNEL, which the notifier hears
through `listen` (a connection of its own). On SQLite across processes the
notifier's short poll finds the event.
"""

import logging
import select
import threading
import time

from django.db import connection, transaction

log = logging.getLogger("croniq.notifications")

CHANNEL = "croniq_notifications"
# One wait for a NOTIFY lasts this long before `stopped()` is asked again.
LISTEN_SLICE = 0.25
MAX_RECONNECT_PAUSE = 30.0

local = threading.Event()


def poke_after_commit():
    """Call inside the transaction that wrote events or notifications."""
    transaction.on_commit(poke)


def poke():
    local.set()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"NOTIFY {CHANNEL}")


def listen(stopped, wake=local.set, interrupt=None, connected=None):
    """PostgreSQL: LISTEN on CHANNEL and call `wake()` at each NOTIFY, and
    after each (re)connect (what committed while nobody listened), until
    `stopped()`. A lost connection is reopened after a pause that doubles.

    With `interrupt`, a file descriptor that becomes readable when it is to
    stop, it blocks until the socket or that has something; without, it
    asks `stopped()` every LISTEN_SLICE. `connected(up)` hears when the
    connection is up and when it is lost."""
    import psycopg

    from runners.hub import listen_params

    told = connected or (lambda up: None)
    pause = 0.5
    while not stopped():
        try:
            with psycopg.Connection.connect(**listen_params(), autocommit=True) as conn:
                conn.execute(f"LISTEN {CHANNEL}")
                told(True)
                wake()
                pause = 0.5
                socket = conn.fileno()
                watched = [socket] if interrupt is None else [socket, interrupt]
                slice_ = LISTEN_SLICE if interrupt is None else None
                while not stopped():
                    # select, not notifies(timeout=): psycopg's own wait
                    # wakes every 100 ms to check for signals.
                    readable, _, _ = select.select(watched, [], [], slice_)
                    if socket in readable and any(True for _ in conn.notifies(timeout=0)):
                        wake()
                told(False)  # stopped
        except Exception as error:  # noqa: BLE001 - any failure: reconnect after a pause
            told(False)
            if stopped():
                return
            log.warning("notifier: LISTEN connection lost (%s); retrying in %.1fs", error, pause)
            deadline = time.monotonic() + pause
            while not stopped() and time.monotonic() < deadline:
                time.sleep(min(LISTEN_SLICE, deadline - time.monotonic()))
            pause = min(MAX_RECONNECT_PAUSE, pause * 2)
