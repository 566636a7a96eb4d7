"""How a web process's hub (`dispatch.hub`) learns that work may be ready.

- PostgreSQL: the process's listener (`core.wakeups`, one LISTEN
  connection) hands it each NOTIFY on the `croniq_work` channel; whoever
  commits new pending executions calls `dispatch.notify.notify_new_work()`.
- SQLite: the loop is another process on the same file, so the hub reads
  the work signature (`work_signature`) while polls wait, after another
  connection committed. Where the listener watches the database's writes
  (Linux) it wakes the hub at each commit, at most every WATCH_INTERVAL;
  elsewhere the hub looks for commits itself (`core.commits`, every
  WATCH_INTERVAL, or QUIET_WATCH_INTERVAL at rest).
"""

import asyncio
import logging
import time
from typing import Any

from django.db import connection

from core import commits, wakeups
from core.db_threads import run_db
from dispatch.notify import CHANNEL

# SQLite: how often the web process looks for other connections' commits
# while polls wait (the highest execution id is read only after one); where
# the listener blocks until the database is written (Linux), at most this
# often (its subscription's `every`).
WATCH_INTERVAL = 0.025
# ...and, where it cannot block, this often once no new execution was
# committed for QUIET_AFTER seconds: at rest, a quarter of the wake-ups.
# Other commits (the loop's heartbeat, a finish) do not count: at rest they
# came every few seconds and kept the watch at its quick pace most of the
# time. Work the loop creates is committed
# `scheduler.firing.ticks.FIRE_LEAD` (200 ms) ahead of its instant, so a first
# commit seen up to 100 ms late is still claimed ahead and handed over at
# the instant; only work due at once (a retry) may wait that much longer.
QUIET_WATCH_INTERVAL = 0.1
QUIET_AFTER = 2.0
# After a failed read of the work signature, before the next.
ERROR_PAUSE = 0.5

log = logging.getLogger("dispatch.hub")

# What the SQLite watch reads after another connection's commit: the
# highest execution id (new work), and the pending executions' count and
# sum of ids (work made ready again: a lease reaped, a queued run promoted,
# a runner's runs released). The pending rows are read from their partial
# index (exec_pending_order), not the table.
WORK_SIGNATURE = """
SELECT (SELECT MAX(id) FROM scheduler_execution), COUNT(*), COALESCE(SUM(id), 0)
FROM scheduler_execution WHERE state = 'pending'
"""


def work_signature() -> tuple[int, int, int]:
    """(highest execution id, pending count, sum of the pending ids)."""
    with connection.cursor() as cursor:
        cursor.execute(WORK_SIGNATURE)
        top, count, total = cursor.fetchone()
    return top or 0, count, total


def more_work(before: tuple[int, int, int], after: tuple[int, int, int]) -> bool:
    """Whether the work signature `after` may hold work that `before` did
    not: a new execution, more pending, or other pending ones. Fewer
    pending (claimed, cancelled) is no news for waiting polls."""
    top, count, ids = after
    was_top, was_count, was_ids = before
    return top != was_top or count > was_count or (count == was_count and ids != was_ids)


def watch_interval(since_new_work: float) -> float:
    """SQLite, looking for commits itself: how long the hub's watch sleeps,
    `since_new_work` seconds after it last saw a new execution committed."""
    return QUIET_WATCH_INTERVAL if since_new_work >= QUIET_AFTER else WATCH_INTERVAL


async def listen(hub: Any) -> None:
    """PostgreSQL: a subscription to CHANNEL on the process's listener,
    until cancelled. Its thread hands each NOTIFY to the hub's event loop;
    on (re)connecting it wakes the scanner for what was committed while
    nobody listened."""

    def wake() -> None:
        hub.loop.call_soon_threadsafe(hub.signal)

    subscription = subscribe(hub, wake)
    try:
        await hub.loop.create_future()  # until cancelled
    finally:
        unsubscribe(hub, subscription)


def subscribe(hub: Any, wake: Any, every: float | None = None) -> wakeups.Subscription:
    """A subscription to CHANNEL for `hub`: `hub.listening` while its hints come."""

    def connected(up: bool) -> None:
        hub.loop.call_soon_threadsafe(setattr, hub, "listening", up)

    return wakeups.listener().subscribe(CHANNEL, wake, connected, every)


def unsubscribe(hub: Any, subscription: wakeups.Subscription) -> None:
    subscription.cancel()
    hub.listening = False


async def watch(hub: Any) -> None:
    """SQLite: wake the hub's scanner when the work signature moves; read
    in a database thread only after a commit (a thread hop and an ORM query
    every WATCH_INTERVAL cost an idle web process about 3% of a core,
    bench/idle_cost.py)."""
    if wakeups.listener().delivers:
        await read_when_committed(hub)
    else:
        await look_for_commits(hub)


class Signature:
    """The work signature as last read, and whether a new read shows more work."""

    def __init__(self) -> None:
        self.seen = None

    async def moved(self, hub: Any) -> bool:
        """Read it anew (raises what the read raised); whether it holds
        work the last read did not."""
        work = await run_db(work_signature)
        seen, self.seen = self.seen, work
        return seen is not None and more_work(seen, work)

    def wanted(self, hub: Any) -> bool:
        """Whether to read: polls wait, or nothing was read yet (a poll
        that comes to wait scans for itself)."""
        return bool(hub.waiters) or self.seen is None


async def read_when_committed(hub: Any) -> None:
    """The listener wakes the watch at each commit (it sees every one: the
    full look is a guard, as with LISTEN)."""
    committed = asyncio.Event()
    signature = Signature()

    def wake() -> None:
        hub.loop.call_soon_threadsafe(committed.set)

    subscription = subscribe(hub, wake, every=WATCH_INTERVAL)
    try:
        while True:
            await committed.wait()
            committed.clear()
            if not signature.wanted(hub):
                continue
            try:
                if await signature.moved(hub):
                    hub.signal()
            except Exception as e:  # noqa: BLE001 - logged; read again, commit or not
                log.warning("croniq hub: cannot watch executions: %s", e)
                await asyncio.sleep(ERROR_PAUSE)
                committed.set()
    finally:
        unsubscribe(hub, subscription)


async def look_for_commits(hub: Any) -> None:
    """Where the listener cannot watch the database's writes (not Linux, an
    in-memory database): look for commits every WATCH_INTERVAL, or
    QUIET_WATCH_INTERVAL once no new work came for QUIET_AFTER."""
    watcher = commits.own_connection(connection.settings_dict["NAME"])
    signature = Signature()
    last_new_work = time.monotonic()
    try:
        while True:
            if signature.wanted(hub) and watcher.moved():
                try:
                    if await signature.moved(hub):
                        last_new_work = time.monotonic()
                        hub.signal()
                except Exception as e:  # noqa: BLE001 - logged; the next round retries
                    log.warning("croniq hub: cannot watch executions: %s", e)
                    watcher.seen = None  # look again next round, commit or not
                    await asyncio.sleep(ERROR_PAUSE)
                    continue
            await asyncio.sleep(watch_interval(time.monotonic() - last_new_work))
    finally:
        watcher.close()
