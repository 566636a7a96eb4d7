"""The notifier thread (notifications.notifier) beside a real SchedulerLoop:
wake-ups, retries in real time, a hanging receiver, outages.

Its threads race the test's own connection, which the SQLite test database
(shared-cache memory) refuses: in-process these run on PostgreSQL; tests/e2e
run the same through real processes on both backends.
"""

import contextlib
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import OperationalError, connection, connections
from django.utils import timezone

import audit
from harness.hooks import SECRET, Hook
from notifications import notifier, notifier_process, wakeup
from notifications.models import Delivery, Notification
from scheduler.firing.loop import SchedulerLoop
from tests.notifications.factories import NOW, SECRET_VARIABLE, notification, webhook


@pytest.fixture
def postgres_only(transactional_db, monkeypatch, settings):
    if connection.vendor != "postgresql":
        pytest.skip("threads racing the test's connection need PostgreSQL (see the docstring)")
    monkeypatch.setenv(SECRET_VARIABLE, SECRET)
    settings.CRONIQ_NOTIFY_WORKERS = 4


@pytest.fixture
def hook():
    server = Hook()
    yield server
    server.close()


ROOT = Path(__file__).resolve().parents[2]


def start(before=()):
    return notifier.Notifier(before=before).start()


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout}s")


def state_of(row):
    row.refresh_from_db()
    return row.state


def test_a_committed_notification_is_delivered_on_its_wakeup_not_at_the_next_poll(
    postgres_only, hook
):
    # Listening, it looks every LISTENING_POLL (30 s): only the wake-up can
    # explain a delivery within wait_for's 10 s (how fast it comes is
    # bench/notifications.py's figure, not a test's).
    assert notifier.LISTENING_POLL >= 30
    running = start()
    wait_for(lambda: running.listening)  # its LISTEN connection is up
    time.sleep(0.3)  # then idle, after its first look
    row = notification(webhook(hook.url), at=timezone.now())
    wakeup.poke()  # NOTIFY on this connection: the notifier's LISTEN hears it

    assert wait_for(lambda: hook.received)
    assert wait_for(lambda: state_of(row) == Notification.DELIVERED)
    running.stop()
    assert not running.alive()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's commit counter")
def test_on_sqlite_an_idle_notifier_sleeps_until_another_connection_commits(transactional_db):
    idle = notifier.Notifier(before=[])
    idle.commits.moved()
    wakeup.local.clear()  # as each round starts (earlier tests may have set it)
    started = time.monotonic()
    idle.sleep(0.3)
    assert time.monotonic() - started >= 0.3  # nothing committed: no early round

    def commit():
        time.sleep(0.1)
        audit.mark_tick(timezone.now())
        connections.close_all()

    looked = []
    moved = idle.commits.moved
    idle.commits.moved = lambda: looked.append(moved()) or looked[-1]
    writer = threading.Thread(target=commit)
    writer.start()
    started = time.monotonic()
    idle.sleep(60)  # only the commit can end it within the test
    writer.join()
    assert looked[-1] is True  # the commit woke it...
    assert time.monotonic() - started < 60 / 2  # ...not the end of its sleep


def test_on_sqlite_the_listener_wakes_the_rounds_when_the_database_is_written(
    tmp_path, monkeypatch
):
    import sqlite3

    from core import wakeups

    path = tmp_path / "watched.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x)")
    listener = wakeups.CommitListener(path)
    assert listener.delivers
    monkeypatch.setattr(wakeups, "_listener", listener)
    idle = notifier.Notifier(before=[])
    if idle.commits is None:
        pytest.skip("on PostgreSQL NOTIFY wakes the rounds")
    idle.subscribe()
    try:
        wait_for(lambda: idle.watching)
        time.sleep(0.2)  # its coming up has woken the rounds
        wakeup.local.clear()
        assert not wakeup.local.wait(0.3)  # nothing written: nothing wakes them
        writer.execute("INSERT INTO t VALUES (1)")
        assert wakeup.local.wait(30)  # nothing else wakes them
        wakeup.local.clear()
        # A burst of commits wakes them at most every COMMIT_CHECK: made a
        # minute, the burst wakes them once at most (the others are held).
        idle.subscription.every = 60.0
        woken = []
        for n in range(20):
            writer.execute("INSERT INTO t VALUES (?)", [n])
            woken.append(wakeup.local.wait(0.005))
            wakeup.local.clear()
        assert woken.count(True) <= 1, woken
    finally:
        idle.stop()
        writer.close()
    assert not idle.watching  # the rounds look for commits themselves again
    wait_for(lambda: listener.thread is None)


def test_on_sqlite_the_rounds_look_for_commits_while_no_thread_watches(monkeypatch):
    idle = notifier.Notifier(before=[])
    looks = []
    idle.commits = type("Commits", (), {"moved": lambda self: looks.append(1) or False})()
    idle.watching = True  # a thread watches: no looks
    wakeup.local.clear()  # as each round starts (earlier tests may have set it)
    idle.sleep(0.2)
    assert not looks
    idle.watching = False  # it died, or never started
    idle.sleep(0.2)
    assert len(looks) >= 2


def test_each_round_routes_first(postgres_only, hook):
    channel = webhook(hook.url)
    routed = []

    def route(now):
        if not routed:
            routed.append(notification(channel, at=now))

    def broken(now):
        raise ValueError("a bug in another part")

    start(before=[broken, route])
    wait_for(lambda: routed and state_of(routed[0]) == Notification.DELIVERED)
    assert hook.ids() == [str(routed[0].pk)]


def test_a_notifier_sleeps_no_longer_than_until_the_next_try_is_due(db):
    idle = notifier.Notifier(before=[])
    notification(webhook("http://127.0.0.1:9/hook"), at=NOW + timedelta(seconds=2))
    assert idle.wait_after(NOW) == 2.0  # a retry's backoff, not the poll
    assert idle.wait_after(NOW + timedelta(seconds=3)) == notifier.POLL  # nothing due later
    idle.listening = True
    assert idle.wait_after(NOW) == 2.0
    assert idle.wait_after(NOW + timedelta(seconds=3)) == notifier.LISTENING_POLL


def test_a_receiver_failing_twice_gets_three_tries_with_one_delivery_id(postgres_only, monkeypatch):
    # Its polls made long (LISTENING_POLL is 30 s): only a sleep until the
    # next retry is due brings each retry within half of one.
    monkeypatch.setattr(notifier, "POLL", 60.0)
    rest = min(notifier.POLL, notifier.LISTENING_POLL)
    hook = Hook(statuses=[500, 500, 200])
    try:
        row = notification(webhook(hook.url), at=timezone.now())
        start()
        wakeup.poke()
        wait_for(lambda: state_of(row) == Notification.DELIVERED, timeout=rest)
    finally:
        hook.close()

    assert hook.ids() == [str(row.pk)] * 3
    assert all(request["verified"] for request in hook.received)
    tries = list(Delivery.objects.filter(notification=row).order_by("attempt"))
    assert [(t.attempt, t.ok, t.status_code) for t in tries] == [
        (1, False, 500), (2, False, 500), (3, True, 200),
    ]  # fmt: skip
    gaps = [(b.at - a.at).total_seconds() for a, b in zip(tries, tries[1:], strict=False)]
    assert 1 <= gaps[0] < rest / 2 and 2 <= gaps[1] < rest / 2  # the backoff, in real time


def test_a_hanging_receiver_holds_one_lane_and_never_the_tick(postgres_only):
    hanging = Hook()
    hanging.hang = True
    healthy = Hook()
    running = None
    try:
        stuck = notification(webhook(hanging.url, name="stuck", timeout=5.0), at=timezone.now())
        running = start()
        wakeup.poke()
        wait_for(lambda: hanging.received)

        # The tick comes back while the receiver still holds its request
        # (its try is recorded when the 5 s timeout ends it): the tick never
        # waits on a lane.
        SchedulerLoop().tick(timezone.now())
        assert not Delivery.objects.filter(notification=stuck).exists()

        # Another channel is served while the first one hangs.
        fine = notification(webhook(healthy.url, name="fine"), at=timezone.now())
        wakeup.poke()
        wait_for(lambda: state_of(fine) == Notification.DELIVERED)
        assert not Delivery.objects.filter(notification=stuck).exists()  # still hanging

        wait_for(lambda: Delivery.objects.filter(notification=stuck).exists())
    finally:
        hanging.close()  # a retry under way fails at once
        healthy.close()
        # Its tries written before the test's database is emptied: a retry
        # recorded during the teardown's TRUNCATE deadlocked with it.
        if running is not None:
            running.stop()
    # The first try (a retry may follow after its backoff).
    timed_out = Delivery.objects.filter(notification=stuck).order_by("attempt").first()
    assert not timed_out.ok and timed_out.error == "timed out after 5.0s"
    assert timed_out.latency >= 5.0
    assert state_of(stuck) == Notification.PENDING  # to be retried


def test_the_loop_starts_the_notifier_in_its_own_process_and_stops_it(
    postgres_only, monkeypatch, hook, settings
):
    monkeypatch.setattr(notifier, "AUTOSTART", True)
    settings.CRONIQ_NOTIFIER = True
    loop = SchedulerLoop()
    assert loop.tick(timezone.now()) == {}  # the step counts nothing
    children = [p for p in multiprocessing.active_children() if p.name == "croniq-notifier"]
    assert len(children) == 1 and children[0].pid != os.getpid()
    row = notification(webhook(hook.url), at=timezone.now())
    wakeup.poke()  # NOTIFY: the child's LISTEN hears it
    wait_for(lambda: state_of(row) == Notification.DELIVERED, timeout=30)
    # No notifier thread in the loop's process: the tick shares nothing with delivery.
    assert not [t for t in threading.enumerate() if t.name == "croniq-notifier"]
    # On PostgreSQL it yields the CPU to the loop's tick.
    niceness = os.getpriority(os.PRIO_PROCESS, children[0].pid)
    assert niceness == min(19, os.getpriority(os.PRIO_PROCESS, 0) + notifier_process.NICENESS)

    loop.tick(timezone.now() + timedelta(seconds=6))  # still running: not started twice
    again = [p for p in multiprocessing.active_children() if p.name == "croniq-notifier"]
    assert again == children
    loop.stop()
    # The loop's stopper thread joins the child too: wait on is_alive(),
    # since a join racing it may return before the exit is recorded.
    assert wait_for(lambda: not children[0].is_alive(), timeout=15)


def test_the_notifier_process_dies_with_its_parent(tmp_path):
    """A loop killed with SIGKILL leaves no notifier behind delivering."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import multiprocessing, os, threading, time\n"
        "import django\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'croniq_project.settings')\n"
        "django.setup()\n"
        "from notifications import notifier_process\n"
        "def child(ready):\n"
        "    notifier_process.die_with_parent()\n"
        "    ready.set()\n"
        "    threading.Event().wait()\n"
        "if __name__ == '__main__':\n"
        "    context = multiprocessing.get_context('spawn')\n"
        "    ready = context.Event()\n"
        "    process = context.Process(target=child, args=(ready,))\n"
        "    process.start()\n"
        "    ready.wait(30)\n"
        "    print(process.pid, flush=True)\n"
        "    time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(ROOT),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    with parent:
        child_pid = int(parent.stdout.readline())
        assert alive(child_pid)
        parent.kill()
    wait_for(lambda: not alive(child_pid), timeout=5)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead; only its parent (gone) could reap it.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_a_database_outage_is_waited_out(postgres_only, hook, caplog):
    outage = {"left": 2}

    def flaky_database(now):
        if outage["left"]:
            outage["left"] -= 1
            raise OperationalError("the database is restarting")

    row = notification(webhook(hook.url), at=timezone.now())
    running = start(before=[flaky_database])
    wait_for(lambda: state_of(row) == Notification.DELIVERED)
    assert running.alive()
    assert "database unavailable (the database is restarting)" in caplog.text
    assert "database is back: notifier resumed" in caplog.text


def test_the_listener_hears_a_notify_from_another_connection_and_rests_meanwhile(
    postgres_only,
):
    from core import db, wakeups

    woken = []
    wakeups.listener().subscribe(wakeup.CHANNEL, lambda: woken.append(time.monotonic()))
    wait_for(lambda: woken)  # connected: one wake for what it may have missed
    # At rest its thread blocks on its socket: no look every few ms
    # (psycopg's notifies(timeout=) wakes every 100 ms).
    switches = f"/proc/self/task/{wakeups.listener().thread.native_id}/status"
    before = context_switches(switches)
    time.sleep(1.0)
    assert context_switches(switches) - before <= 1
    with db.listen_connection() as other:
        other.execute(f"NOTIFY {wakeup.CHANNEL}")
        # Its thread blocks on its socket with no timeout: only the NOTIFY
        # can wake it (how soon: bench/wakeups.py).
        wait_for(lambda: len(woken) == 2)


def test_a_running_notifier_rests_between_hints_and_stops_at_once(postgres_only):
    running = start()
    try:
        wait_for(lambda: running.listening)  # its LISTEN connection is up
        # Nothing needs a look between wake-ups: the listener blocks on its
        # socket and the stop pipe, the rounds on the wake-up event, and the
        # safety round comes every LISTENING_POLL.
        assert running.wait_after(timezone.now()) == notifier.LISTENING_POLL
        from core import wakeups

        listener = wakeups.listener().thread
        threads = [listener, running.thread]
        paths = [f"/proc/self/task/{thread.native_id}/status" for thread in threads]
        time.sleep(0.5)  # the first round, and the wake-up of the listener's first LISTEN
        before = [context_switches(path) for path in paths]
        time.sleep(1.0)
        woke = [context_switches(path) - was for path, was in zip(paths, before, strict=True)]
        assert max(woke) <= 1, woke  # a look every 250 ms was 4 each
    finally:
        # The stop wakes it: its rounds would look again after LISTENING_POLL.
        running.stop(timeout=notifier.LISTENING_POLL / 2)
    listener.join(30)  # its only subscription ended
    assert not listener.is_alive() and not running.thread.is_alive()
    assert not running.listening


def context_switches(status_path):
    """The voluntary context switches of a thread (Linux): its wake-ups."""
    with open(status_path) as status:
        for line in status:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError(f"no voluntary_ctxt_switches in {status_path}")


def test_the_recorder_writes_again_after_a_database_error(postgres_only, hook, monkeypatch):
    from notifications import delivery

    channel = webhook(hook.url)
    notification(channel, at=timezone.now())
    real_write, failures = delivery.write, []

    def failing_once(*tries):
        if not failures:
            failures.append(len(tries))
            raise OperationalError("server closed the connection unexpectedly")
        return real_write(*tries)

    monkeypatch.setattr(delivery, "write", failing_once)
    monkeypatch.setattr(delivery, "WRITE_RETRIES", (0.01, 0.01))
    written = threading.Event()
    recorder = delivery.Recorder(written=written.set).start()
    [claimed] = delivery.claim(timezone.now())
    recorder.put(delivery.attempt(claimed, timezone.now()))
    assert written.wait(10)
    recorder.close()

    assert failures == [1]
    assert Notification.objects.get().state == Notification.DELIVERED
    assert not recorder.thread.is_alive()


def test_a_lane_of_the_notifiers_pool_keeps_its_connection_unless_an_error_ended_it(
    postgres_only, monkeypatch
):
    from concurrent.futures import ThreadPoolExecutor

    from notifications import delivery

    def lane_leaves_connection_open(keep):
        with contextlib.suppress(OperationalError):
            delivery.lane(timezone.now, "loop-a", delivery.Budget(10), keep_connection=keep)
        return connection.connection is not None

    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(lane_leaves_connection_open, True).result() is True
        assert pool.submit(lane_leaves_connection_open, False).result() is False
        assert pool.submit(lane_leaves_connection_open, True).result() is True

        def broken(*args, **kwargs):
            connection.ensure_connection()
            raise OperationalError("server closed the connection unexpectedly")

        monkeypatch.setattr(delivery, "claim", broken)
        assert pool.submit(lane_leaves_connection_open, True).result() is False
