"""The process's one wake-up listener (core.wakeups), on a real database."""

import sqlite3
import threading
import time

import pytest
from django.db import connection

from core import commits, db, wakeups


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout}s")


class Heard:
    """A subscriber that counts its wake-ups and knows whether it is up."""

    def __init__(self):
        self.woken = threading.Semaphore(0)
        self.up = False

    def wake(self):
        self.woken.release()

    def connected(self, up):
        self.up = up

    def drain(self):
        while self.woken.acquire(blocking=False):
            pass

    def wait(self, timeout=5.0):
        return self.woken.acquire(timeout=timeout)


def cpu_seconds(thread):
    """The CPU time of `thread` so far (Linux)."""
    with open(f"/proc/self/task/{thread.native_id}/schedstat") as schedstat:
        return int(schedstat.read().split()[0]) / 1e9


def send(channel):
    with db.listen_connection() as other:
        other.execute(f"NOTIFY {channel}")


def listen_sessions():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            [db.LISTEN_APPLICATION],
        )
        return [pid for (pid,) in cursor.fetchall()]


postgres = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="LISTEN/NOTIFY: PostgreSQL only"
)


@postgres
@pytest.mark.django_db(transaction=True)
def test_one_connection_listens_on_every_channel_of_the_process():
    channels = ["croniq_test_a", "croniq_test_b", "croniq_test_c"]
    heard = {channel: Heard() for channel in channels}
    for channel, each in heard.items():
        wakeups.listener().subscribe(channel, each.wake, each.connected)
    wait_for(lambda: all(each.up for each in heard.values()))
    assert len(listen_sessions()) == 1
    for each in heard.values():
        assert each.wait()  # up: one wake for what came before
    thread = wakeups.listener().thread
    before = cpu_seconds(thread)
    time.sleep(0.5)
    assert cpu_seconds(thread) - before < 0.01  # at rest it blocks on its socket
    send("croniq_test_b")
    assert heard["croniq_test_b"].wait()
    assert not heard["croniq_test_a"].wait(0.2)  # other channels stay asleep


@postgres
@pytest.mark.django_db(transaction=True)
def test_after_its_connection_is_killed_it_listens_again_and_later_hints_arrive(
    monkeypatch,
):
    monkeypatch.setattr(wakeups, "FIRST_RECONNECT_PAUSE", 0.05)
    heard = Heard()
    wakeups.listener().subscribe("croniq_test_a", heard.wake, heard.connected)
    wait_for(lambda: heard.up)
    (pid,) = listen_sessions()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    wait_for(lambda: listen_sessions() and listen_sessions() != [pid])
    wait_for(lambda: heard.up)
    heard.drain()
    send("croniq_test_a")
    assert heard.wait()


@postgres
@pytest.mark.django_db(transaction=True)
def test_a_subscriber_that_raises_does_not_stop_the_others(caplog):
    def broken():
        raise RuntimeError("a broken subscriber")

    heard = Heard()
    wakeups.listener().subscribe("croniq_test_a", broken)
    wakeups.listener().subscribe("croniq_test_a", heard.wake, heard.connected)
    wait_for(lambda: heard.up)
    heard.drain()
    for _ in range(2):
        send("croniq_test_a")
        assert heard.wait()
    assert "a broken subscriber" in caplog.text


@postgres
@pytest.mark.django_db(transaction=True)
def test_the_connection_closes_with_the_last_subscription():
    heard = Heard()
    subscription = wakeups.listener().subscribe("croniq_test_a", heard.wake, heard.connected)
    wait_for(lambda: heard.up)
    subscription.cancel()
    wait_for(lambda: not listen_sessions())


def test_on_sqlite_every_subscriber_wakes_when_another_connection_commits(tmp_path):
    path = tmp_path / "watched.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x)")
    listener = wakeups.CommitListener(path)
    if not listener.delivers:
        pytest.skip("the database's writes cannot be watched here")
    first, second = Heard(), Heard()
    subscriptions = [
        listener.subscribe("croniq_test_a", first.wake, first.connected),
        listener.subscribe("croniq_test_b", second.wake, second.connected),
    ]
    try:
        wait_for(lambda: first.up and second.up)
        first.drain()
        second.drain()
        assert not first.wait(0.3)  # nothing committed: nothing wakes them
        writer.execute("INSERT INTO t VALUES (1)")
        assert first.wait() and second.wait()
    finally:
        for subscription in subscriptions:
            subscription.cancel()
        writer.close()
    wait_for(lambda: listener.thread is None)  # it ends with the last subscription


def test_on_sqlite_a_flood_of_commits_is_looked_at_once_a_hold_when_every_subscriber_holds(
    tmp_path, monkeypatch
):
    path = tmp_path / "watched.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA synchronous=NORMAL")
    writer.execute("CREATE TABLE t (x)")
    looks = []
    own_connection = commits.own_connection

    def counted(name):
        watcher = own_connection(name)
        moved = watcher.moved
        watcher.moved = lambda: looks.append(1) or moved()
        return watcher

    monkeypatch.setattr(commits, "own_connection", counted)
    listener = wakeups.CommitListener(path)
    if not listener.delivers:
        pytest.skip("the database's writes cannot be watched here")
    first, second = Heard(), Heard()
    subscriptions = [
        listener.subscribe("croniq_test_a", first.wake, first.connected, every=0.05),
        listener.subscribe("croniq_test_b", second.wake, second.connected, every=0.1),
    ]
    try:
        wait_for(lambda: first.up and second.up)
        looks.clear()
        began = time.monotonic()
        for _ in range(300):
            writer.execute("INSERT INTO t VALUES (1)")
            time.sleep(0.001)
        seconds = time.monotonic() - began
        assert first.wait() and second.wait()  # woken all the same
        # Once a hold (50 ms) at most, a few looks each (the listener's
        # settling pauses), not one or more a commit.
        assert len(looks) <= (seconds / 0.05 + 2) * 4
    finally:
        for subscription in subscriptions:
            subscription.cancel()
        writer.close()
    wait_for(lambda: listener.thread is None)
