"""The notifier: routes new events and delivers due notifications in threads
of its own, beside the scheduler loop, so a slow receiver never delays a tick.

`scheduler_loop` starts it with its first tick (the "notifier" step) and it
stops with the loop (`SchedulerLoop.stopping`). Each round routes new events
(`routing.route_pending`), then hands due
notifications to delivery lanes in a pool of CRONIQ_NOTIFY_WORKERS threads
(`delivery.lane`): a lane claims and delivers one notification after another
until none is due, so one hanging receiver holds one lane while the others
go on. The round does not wait for the lanes.

Between rounds it sleeps until the next retry is due, a wake-up or a short
poll: `wakeup.local` wakes it in the same process; the process's listener
(`core.wakeups`) wakes it when another process commits an event: on
PostgreSQL a NOTIFY, on SQLite, where other processes cannot signal, any
commit (the listener blocks until the database's log is written, on Linux;
elsewhere the notifier looks every 50 ms, at a counter: `core.commits`). A
database outage is logged and retried with backoff; nothing ends the thread
but a stop.
"""

import logging
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.utils import DatabaseError, InterfaceError, OperationalError
from django.utils import timezone

from core import commits, db, wakeups
from notifications import delivery, routing, wakeup

log = logging.getLogger("croniq.notifications")

# Seconds between rounds when nothing wakes the notifier: NOTIFY on
# PostgreSQL, another connection's commit on SQLite wake it, and it sleeps
# no longer than until the next retry or the end of a claim (a dead
# notifier's: `delivery.next_due_at`). The poll covers a hint lost (a
# writer that does not notify); at 1 s its rounds were a third of an idle
# notifier's CPU (bench/idle_cost.py).
POLL = 5.0
# ...and this while the LISTEN connection is up (PostgreSQL): every writer of
# events pokes it (`wakeup.poke_after_commit`), and it wakes on connecting.
LISTENING_POLL = 30.0
# SQLite: how often the notifier looks for other connections' commits, and
# at most how often they wake it when the process's listener watches for
# them (its subscription's `every`): in a burst each delivery commits, and a
# round for each would cost more than it finds.
COMMIT_CHECK = 0.05
# As the scheduler loop's (scheduler.firing.loop): a failover's new primary is
# reached within 5 s of taking writes.
MAX_OUTAGE_BACKOFF = 5.0
ERROR_PAUSE = 1.0
# A lane claims without limit: it ends when nothing is due.
LANE_BUDGET = 10**9
# The test suite turns this off (tests/conftest.py): a loop ticked by a test
# must not leave a thread behind it. Tests of the notifier start one.
AUTOSTART = True

_running = weakref.WeakSet()


class DeliveryPool(ThreadPoolExecutor):
    """The notifier's delivery threads. Each keeps its database connection
    from one lane to the next (`delivery.lane(keep_connection=True)`), so a
    notification does not wait for a connect; the connections are closed
    when the pool has shut down."""

    def __init__(self, workers: int) -> None:
        self.connections = []
        super().__init__(
            workers, thread_name_prefix="croniq-deliver", initializer=self.remember_connection
        )

    def remember_connection(self) -> None:
        self.connections.append(connections[DEFAULT_DB_ALIAS])

    def shutdown(self, wait: bool = True, **kwargs: Any) -> None:
        super().shutdown(wait=wait, **kwargs)
        if wait:
            # Their threads have ended: nothing else uses these connections.
            for wrapper in self.connections:
                wrapper.inc_thread_sharing()
                wrapper.close()


class Notifier:
    def __init__(
        self, clock=timezone.now, workers=None, before=None, owner=None, stopping=None
    ) -> None:
        self.clock = clock
        self.workers = workers or settings.CRONIQ_NOTIFY_WORKERS
        self.before = [routing.route_pending] if before is None else list(before)
        self.owner = owner or delivery.default_owner()
        self.stopping = threading.Event()
        self.loop_stopping = stopping  # the loop's: the notifier stops with it
        self.lock = threading.Lock()
        self.active = 0  # lanes running
        self.outage_backoff = 0.0
        self.pool = None
        self.recorder = None
        self.thread = None
        self.subscription = None  # to the process's listener
        self.poll = POLL
        # PostgreSQL: NOTIFYs reach its subscription.
        self.listening = False
        # SQLite: the listener watches the database's writes, so the rounds
        # need not look for commits; they still poll every POLL, for a
        # commit it did not see (`commits.SETTLE_PAUSES`).
        self.watching = False
        # By design: NOTIFY needs no look; SQLite's commits may (`sleep`).
        self.commits = None if db.on_postgres() else commits.of_django(connection, watch=False)

    # -- life ------------------------------------------------------------------

    def start(self) -> "Notifier":
        self.pool = DeliveryPool(self.workers)
        self.recorder = delivery.Recorder(written=wakeup.local.set).start()
        self.thread = threading.Thread(target=self.run, name="croniq-notifier", daemon=True)
        self.subscribe()
        self.thread.start()
        _running.add(self)
        return self

    def is_set(self) -> bool:
        """Whether the notifier is stopping (lanes read it as an Event)."""
        return self.stopping.is_set() or bool(self.loop_stopping and self.loop_stopping.is_set())

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def subscribe(self) -> None:
        """The process's listener (`core.wakeups`) sets `wakeup.local` at
        each NOTIFY (PostgreSQL) or commit (SQLite, at most every
        COMMIT_CHECK); where it cannot watch SQLite's writes, the rounds look
        for commits themselves (`sleep`)."""
        listener = wakeups.listener()
        if self.commits is None:
            self.subscription = listener.subscribe(
                wakeup.CHANNEL, wakeup.local.set, self.heard_from
            )
        elif listener.delivers:
            self.subscription = listener.subscribe(
                wakeup.CHANNEL, wakeup.local.set, self.watched, every=COMMIT_CHECK
            )

    def stop(self, timeout: float = 30.0) -> None:
        """Stop claiming; the tries under way end (each within its timeout)."""
        self.stopping.set()
        wakeup.local.set()
        if self.subscription is not None:
            self.subscription.cancel()
            self.subscription = None
            self.listening = self.watching = False
        if self.thread is not None:
            self.thread.join(timeout)
        _running.discard(self)

    def run(self) -> None:
        log.info("notifier started (%d delivery workers)", self.workers)
        try:
            while not self.is_set():
                wakeup.local.clear()
                self.sleep(self.round_safely())
        finally:
            self.pool.shutdown(wait=True)
            self.recorder.close()
            connection.close()
            log.info("notifier stopped")

    def sleep(self, seconds: float) -> None:
        """Until `seconds` pass, a wake-up, another connection's commit
        (SQLite) or a stop."""
        deadline = time.monotonic() + seconds
        # stop() sets wakeup.local: on PostgreSQL, or while the listener
        # watches for commits, nothing needs a look between wake-ups.
        polls = self.commits is not None and not self.watching
        check = COMMIT_CHECK if polls else None
        while not self.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or wakeup.local.wait(left if check is None else min(left, check)):
                return
            if polls and self.commits.moved():
                return

    # -- rounds ----------------------------------------------------------------

    def round_safely(self) -> float:
        """One round; the seconds to sleep before the next."""
        try:
            # The connection stays open between rounds (a new one per round
            # would cost every notification a connect); a database error
            # below closes it, and the next round opens a fresh one.
            now = self.clock()
            self.round(now)
            if self.outage_backoff:
                log.info("database is back: notifier resumed")
            self.outage_backoff = 0.0
            return self.wait_after(self.clock())
        except (OperationalError, InterfaceError, DatabaseError) as error:
            self.outage_backoff = min(MAX_OUTAGE_BACKOFF, max(0.5, self.outage_backoff * 2))
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            log.warning(
                "notifier: database unavailable (%s); retrying in %.1fs",
                first_line or type(error).__name__,
                self.outage_backoff,
            )
            connection.close()
            return self.outage_backoff
        except Exception:
            log.exception("notifier error; carrying on in %.1fs", ERROR_PAUSE)
            return ERROR_PAUSE

    def round(self, now: datetime) -> int:
        """Route, then start lanes for the due notifications; how many started."""
        for step in self.before:
            try:
                if step(now):
                    wakeup.local.set()  # it did work: there may be more, come back at once
            except (OperationalError, InterfaceError):
                raise
            except Exception:
                # Delivery of what is already routed goes on.
                log.exception("notifier: %s failed", getattr(step, "__qualname__", step))
        return self.start_lanes(now)

    def start_lanes(self, now: datetime) -> int:
        with self.lock:
            free = self.workers - self.active
        if free <= 0:
            return 0  # every lane is busy, and each claims the next when done
        wanted, batch = delivery.lane_plan(now, free)
        for _ in range(wanted):
            with self.lock:
                self.active += 1
            budget = delivery.Budget(LANE_BUDGET)
            try:
                lane = self.pool.submit(
                    delivery.lane, self.clock, self.owner, budget, self, self.recorder,
                    keep_connection=True, batch=batch,
                )  # fmt: skip
            except RuntimeError:  # the interpreter is exiting (`scheduler_loop --once`)
                with self.lock:
                    self.active -= 1
                self.stopping.set()
                return 0
            lane.add_done_callback(self.lane_done)
        return wanted

    def lane_done(self, lane: Any) -> None:
        with self.lock:
            self.active -= 1
        error = lane.exception()
        if error is not None:
            log.warning("notifier: a delivery lane stopped: %s", error)
        # Its failures are due again soon: recompute the sleep.
        wakeup.local.set()

    def wait_after(self, now: datetime) -> float:
        poll = LISTENING_POLL if self.listening else self.poll
        upcoming = delivery.next_due_at(now)
        if upcoming is None:
            return poll
        return min(poll, max(0.0, (upcoming - now).total_seconds()))

    def heard_from(self, up: bool) -> None:
        self.listening = up

    def watched(self, up: bool) -> None:
        """SQLite: the listener watches the database's writes (or, `up`
        false, stopped: the rounds look for commits themselves again)."""
        self.watching = up


def stop_all(timeout: float = 30.0) -> None:
    """Stop every notifier of this process (tests, after each test)."""
    for notifier in list(_running):
        notifier.stop(timeout)
