"""The process's one wake-up listener: who waits for another process's
writes subscribes here, and is called when one may have come.

- PostgreSQL: one connection of its own (`core.db.listen_connection`)
  LISTENs on every channel the process subscribes to, on one thread that
  blocks on its socket. A lost connection is made anew after a pause that
  doubles (at most MAX_RECONNECT_PAUSE), LISTENs again, and wakes every
  subscriber once: what was sent while nobody listened is unknown.
- SQLite: no NOTIFY; the thread blocks until the database's log is
  written (`core.commits.FileWrites`) and wakes every subscriber, whatever
  its channel, when another connection committed. Where writes cannot be
  watched (not Linux, an in-memory database) `delivers` is false and the
  subscribers look for commits themselves.

A subscriber gives `wake()`, called on the listener's thread at each hint
of its channel (and after each (re)connect), and optionally `connected(up)`,
told when the hints start and stop coming, and `every`: it is woken at most
that often, a hint that comes sooner held until then (never dropped; on
SQLite a burst of commits is then one wake-up, not one each). Both
callables must be quick and must not block: set an event, write to a pipe
(`Flag`), or hand over to an event loop (`loop.call_soon_threadsafe`). One
that raises is logged; the others are still called. The thread ends with
the last subscription.

On SQLite the hub, the scheduler loop and the notifier all subscribe here:
one thread and one inotify watch per process where each ran its own.
"""

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connection

from core import commits, db

log = logging.getLogger("croniq.wakeups")

FIRST_RECONNECT_PAUSE = 0.5
# At most this between two tries: after a failover the listener reaches the
# new primary within 5 s of it taking writes (with 30 s, the hubs waited on
# their slower safety scans that much longer).
MAX_RECONNECT_PAUSE = 5.0
# SQLite: the longest the listener blocks on the database's log at once.
COMMIT_WAIT = 30.0


class Flag:
    """A wake-up a thread can block on with select(): `set()` from any
    thread; `clear()` says whether it was set."""

    def __init__(self) -> None:
        self.read, self.write = os.pipe()
        os.set_blocking(self.read, False)
        os.set_blocking(self.write, False)

    def fileno(self) -> int:
        return self.read

    def set(self) -> None:
        with contextlib.suppress(OSError):  # full: it is set already; closed: nobody waits
            os.write(self.write, b"!")

    def clear(self) -> bool:
        try:
            return bool(os.read(self.read, 4096))
        except (BlockingIOError, OSError):
            return False

    def close(self) -> None:
        for end in (self.read, self.write):
            with contextlib.suppress(OSError):
                os.close(end)


class Subscription:
    def __init__(
        self,
        listener: "Listener",
        channel: str,
        wake: Callable[[], Any],
        connected: Callable[[bool], Any] | None,
        every: float | None = None,
    ) -> None:
        self.listener = listener
        self.channel = channel
        self.wake = wake
        self.connected = connected
        self.up = False  # hints of its channel reach it
        self.every = every
        self.next_at = 0.0  # time.monotonic() before which it is not woken again
        self.held = False  # a hint came before next_at

    def cancel(self) -> None:
        self.listener.unsubscribe(self)


class Listener:
    """What both backends share: the subscribers, the thread, the calls."""

    delivers = True

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.subscriptions = []
        self.thread = None
        self.control = Flag()  # wakes the thread: a subscription came or went

    def subscribe(
        self,
        channel: str,
        wake: Callable[[], Any],
        connected: Callable[[bool], Any] | None = None,
        every: float | None = None,
    ) -> Subscription:
        subscription = Subscription(self, channel, wake, connected, every)
        with self.lock:
            self.subscriptions.append(subscription)
            if self.thread is None and self.delivers:
                self.thread = threading.Thread(target=self.run, name="croniq-wakeups", daemon=True)
                self.thread.start()
        self.control.set()
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self.lock:
            if subscription in self.subscriptions:
                self.subscriptions.remove(subscription)
        self.control.set()

    def current(self) -> list[Subscription] | None:
        """The subscriptions now, or None (the thread ends) when none is left."""
        with self.lock:
            if not self.subscriptions:
                self.thread = None
                return None
            return list(self.subscriptions)

    def call(self, function: Callable[..., Any], *args: Any) -> None:
        try:
            function(*args)
        except Exception:
            log.exception("wake-ups: a subscriber failed; the others are still called")

    def hint(self, subscription: Subscription, now: float) -> None:
        """Wake `subscription`, or hold the hint until its `every` allows."""
        if now < subscription.next_at:
            subscription.held = True
            return
        subscription.held = False
        if subscription.every:
            subscription.next_at = now + subscription.every
        self.call(subscription.wake)

    def release(self, subscriptions: list[Subscription]) -> float | None:
        """Wake the subscriptions whose held hint is due now; the seconds
        until the next one is (None: none is held)."""
        now = time.monotonic()
        soonest = None
        for subscription in subscriptions:
            if subscription.held:
                if now >= subscription.next_at:
                    self.hint(subscription, now)
                else:
                    left = subscription.next_at - now
                    soonest = left if soonest is None else min(soonest, left)
        return soonest

    def up(self, subscriptions: list[Subscription]) -> None:
        """Hints reach `subscriptions` from now on: tell them, and wake them
        for what came before."""
        for subscription in subscriptions:
            if not subscription.up:
                subscription.up = True
                # First: who is told it is up has the wake-up.
                self.hint(subscription, time.monotonic())
                if subscription.connected is not None:
                    self.call(subscription.connected, True)

    def down(self) -> None:
        with self.lock:
            subscriptions = list(self.subscriptions)
        for subscription in subscriptions:
            if subscription.up:
                subscription.up = False
                if subscription.connected is not None:
                    self.call(subscription.connected, False)

    def pause(self, seconds: float) -> bool:
        """Wait `seconds`, or less once no subscriber is left (True)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self.control], [], [], left)
            if readable:
                self.control.clear()
                if self.current() is None:
                    return True
        return self.current() is None

    def run(self) -> None:
        pause = FIRST_RECONNECT_PAUSE
        while True:
            try:
                if self.serve():
                    return
                pause = FIRST_RECONNECT_PAUSE
            except Exception as error:  # noqa: BLE001 - any failure: reconnect after a pause
                self.down()
                log.warning("wake-ups: listening stopped (%s); again in %.1fs", error, pause)
                if self.pause(pause):
                    return
                pause = next_pause(pause)


def next_pause(pause: float) -> float:
    """The pause before the next try to listen, after one of `pause`."""
    return min(MAX_RECONNECT_PAUSE, pause * 2)


class PostgresListener(Listener):
    def serve(self) -> bool:
        """Listen on one connection until no subscriber is left (True);
        raises when the connection is lost."""
        with db.listen_connection() as conn:
            try:
                return self.listen(conn)
            finally:
                self.down()

    def listen(self, conn: Any) -> bool:
        listened = set()
        socket = conn.fileno()
        heard = set()  # channels notified, not yet dispatched
        # What comes while LISTEN runs, psycopg hands to this handler.
        conn.add_notify_handler(lambda notify: heard.add(notify.channel))
        while True:
            subscriptions = self.current()
            if subscriptions is None:
                return True
            channels = {subscription.channel for subscription in subscriptions}
            for channel in sorted(channels - listened):
                conn.execute(f"LISTEN {channel}")
            for channel in sorted(listened - channels):
                conn.execute(f"UNLISTEN {channel}")
            listened = channels
            self.up(subscriptions)
            held = self.release(subscriptions)
            if not heard and socket in self.wait(socket, held):
                # Read what the socket holds, no round trip (psycopg's
                # notifies() would wake every 100 ms while it waits).
                conn.pgconn.consume_input()  # a lost connection raises
                while (notify := conn.pgconn.notifies()) is not None:
                    heard.add(notify.relname.decode())
            now = time.monotonic()
            for subscription in subscriptions:
                if subscription.channel in heard:
                    self.hint(subscription, now)
            heard.clear()

    def wait(self, socket: int, timeout: float | None) -> list[Any]:
        readable, _, _ = select.select([socket, self.control], [], [], timeout)
        if self.control in readable:
            self.control.clear()
        return readable


class CommitListener(Listener):
    """SQLite: every subscriber is woken by any other connection's commit."""

    def __init__(self, name: Any) -> None:
        super().__init__()
        self.name = str(name)
        writes = commits.file_writes(self.name)
        self.delivers = writes is not None
        if writes is not None:
            writes.close()  # the thread opens its own

    def serve(self) -> bool:
        watcher = commits.own_connection(self.name)
        if not watcher.blocks:
            raise ConnectionError("the database's writes cannot be watched")
        try:
            watcher.moved()  # what is committed now is no news
            while True:
                subscriptions = self.current()
                if subscriptions is None:
                    return True
                self.up(subscriptions)
                held = self.release(subscriptions)
                resting = holding(subscriptions, time.monotonic())
                if resting is not None:
                    # Every subscriber is within its `every`: a commit now
                    # would only be held. Under a flood of commits (a
                    # thousand pings a second) the thread looks once when
                    # the first hold ends, the commits between one hint,
                    # instead of waking at each (the log's writes wait in
                    # the inotify queue; `wait` below sees them).
                    readable, _, _ = select.select([self.control], [], [], resting)
                    if readable:
                        self.control.clear()
                    continue
                seconds = COMMIT_WAIT if held is None else held
                if watcher.wait(seconds, self.control.fileno()):
                    now = time.monotonic()
                    for subscription in subscriptions:
                        self.hint(subscription, now)
                else:
                    self.control.clear()
        finally:
            self.down()
            watcher.close()


def holding(subscriptions: list[Subscription], now: float) -> float | None:
    """The seconds until the first hold ends when every subscription is
    within its `every` (woken less than that ago), else None."""
    if not all(subscription.every and subscription.next_at > now for subscription in subscriptions):
        return None
    return min(subscription.next_at for subscription in subscriptions) - now


_listener = None
_listener_lock = threading.Lock()


def listener() -> Listener:
    """The process's listener (made on first use, for the default database)."""
    global _listener
    with _listener_lock:
        if _listener is None:
            if db.on_postgres():
                _listener = PostgresListener()
            else:
                _listener = CommitListener(connection.settings_dict["NAME"])
        return _listener


def reset() -> None:
    """Cancel every subscription and forget the listener (its thread ends,
    closing its connection): tests, and a process about to drop its
    database."""
    global _listener
    with _listener_lock:
        current, _listener = _listener, None
    if current is None:
        return
    with current.lock:
        current.subscriptions.clear()
        thread = current.thread
    current.control.set()
    if thread is not None:
        thread.join(5)
