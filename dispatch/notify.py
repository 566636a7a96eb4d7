"""The new-work hint between processes (docs/design.md §4, "Long-poll").

Whoever commits new pending executions calls `notify_new_work()`; each web
process's hub subscribes to `CHANNEL` (`dispatch.hub`, `core.wakeups`). The scheduler reaches it
through `scheduler.firing.notifier`, where `RunnersConfig.ready` registers it.
"""

CHANNEL = "croniq_work"


def notify_new_work(using: str = "default") -> None:
    """Tell every web process that pending executions were committed.

    Call it after the commit, or inside the transaction that creates them
    (PostgreSQL sends it when that commits). One call covers any number of
    new executions: NOTIFY serialises commits, so it is a coalesced hint,
    not one per execution. On SQLite it does nothing: each web process
    watches the execution table itself.
    """
    from core import db

    # Inside a transaction PostgreSQL holds the NOTIFY until the commit, and
    # drops it on a rollback (of a savepoint too): the hint goes with the
    # transaction's own round trips, not one more after them.
    db.notify(CHANNEL, using)
