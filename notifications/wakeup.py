"""Wake the notifier when an event commits, so a failure reaches its
receivers in milliseconds rather than at the next poll.

In the same process (`manage.py serve`, tests) a threading.Event, `local`;
across processes on PostgreSQL a NOTIFY on CHANNEL, which the notifier hears
through its process's listener (`core.wakeups`). On SQLite across processes the
notifier's short poll finds the event.
"""

import threading

from django.db import transaction

from core import db

CHANNEL = "croniq_notifications"

local = threading.Event()


def poke_after_commit():
    """Call inside the transaction that wrote events or notifications."""
    transaction.on_commit(poke)


def poke():
    local.set()
    db.notify(CHANNEL)
