"""The new-work hint between processes (DESIGN.md §4, "Long-poll").

Whoever commits new pending executions calls `notify_new_work()`; each web
process's hub LISTENs on `CHANNEL` (`runners.hub`). The scheduler reaches it
through `scheduler.notifier`, where `RunnersConfig.ready` registers it.
"""

from django.db import transaction

CHANNEL = "croniq_work"


def notify_new_work(using="default"):
    """Tell every web process that pending executions were committed.

    Call it after the commit (inside `transaction.atomic()` it waits for the
    commit). One call covers any number of new executions: NOTIFY serialises
    commits, so it is a coalesced hint, not one per execution. On SQLite it
    does nothing: each web process watches the execution table itself.
    """
    from django.db import connections

    conn = connections[using]
    if conn.vendor != "postgresql":
        return
    if conn.in_atomic_block:
        transaction.on_commit(lambda: _notify(conn), using=using)
    else:
        _notify(conn)


def _notify(conn):
    with conn.cursor() as cursor:
        cursor.execute(f"NOTIFY {CHANNEL}")
