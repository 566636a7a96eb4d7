"""croniq_project/sqlite: a connection marked eager takes SQLite's write lock
as soon as it is free, and still gives up after its busy timeout."""

import threading
import time
from types import SimpleNamespace

import pytest
from django.db import OperationalError
from django.db.utils import ConnectionHandler
from django.test.utils import CaptureQueriesContext

from croniq_project.database import database_from_url


@pytest.fixture
def file_connections(tmp_path, django_db_blocker):
    """Two connections to one SQLite file, as two processes would have
    (not the test database: files of their own)."""
    config = database_from_url(f"sqlite:///{tmp_path}/locks.sqlite3")
    handler = ConnectionHandler({"default": dict(config), "other": dict(config)})
    made = [handler["default"], handler["other"]]
    with django_db_blocker.unblock():
        yield made
        for each in made:
            each.close()


def hold_write_lock(holder, taken, release):
    """Holds the write lock from `taken` until `release`; returns the
    monotonic time before its COMMIT (the lock is released from then)."""
    holder.inc_thread_sharing()  # opened here, used by the thread below
    with holder.cursor() as cursor:
        cursor.execute("BEGIN IMMEDIATE")
        taken.set()
        release.wait(10)
        committing = time.monotonic()
        cursor.execute("COMMIT")
    return committing


def test_an_eager_connection_takes_the_write_lock_right_after_its_release(
    file_connections, monkeypatch
):
    from croniq_project.sqlite import base

    holder, eager = file_connections
    eager.eager_write_lock = True
    holder.ensure_connection()
    taken, release, committing = threading.Event(), threading.Event(), []
    thread = threading.Thread(
        target=lambda: committing.append(hold_write_lock(holder, taken, release))
    )
    thread.start()
    taken.wait(5)
    # Instead of SQLite's busy handler (its sleeps grow to 100 ms), it asks
    # again every EAGER_RETRY: the lock is released once it has asked.
    pauses = []

    def pause(seconds):
        pauses.append(seconds)
        release.set()
        time.sleep(seconds)

    monkeypatch.setattr(base, "time", SimpleNamespace(monotonic=time.monotonic, sleep=pause))
    eager._start_transaction_under_autocommit()  # what atomic() calls
    got = time.monotonic()
    eager.cursor().execute("COMMIT")
    thread.join()
    assert pauses and set(pauses) == {base.EAGER_RETRY}
    # It had the lock once the holder let go (how soon: bench/wakeups.py).
    assert committing[0] <= got
    with eager.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        assert cursor.fetchone()[0] == 20000  # restored for later statements


def test_an_eager_connection_still_gives_up_after_its_busy_timeout(file_connections):
    holder, eager = file_connections
    eager.eager_write_lock = True
    with holder.cursor() as cursor:
        cursor.execute("BEGIN IMMEDIATE")
    with eager.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout = 200")
    started = time.monotonic()
    with pytest.raises(OperationalError, match="locked"):
        eager._start_transaction_under_autocommit()
    # Its own 200 ms, not the 20 s the connection's settings give.
    assert 0.2 <= time.monotonic() - started < 20 / 2
    with eager.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        assert cursor.fetchone()[0] == 200
    holder.cursor().execute("ROLLBACK")


def test_an_eager_transaction_start_is_one_statement(file_connections):
    _, eager = file_connections
    eager.eager_write_lock = True
    eager._start_transaction_under_autocommit()
    eager.cursor().execute("COMMIT")

    with CaptureQueriesContext(eager) as queries:
        eager._start_transaction_under_autocommit()
    eager.cursor().execute("COMMIT")

    assert [q["sql"] for q in queries] == ["BEGIN IMMEDIATE"]


def test_asking_for_json_support_waits_for_no_write_lock(file_connections):
    """From Django 6.1 every command's model checks ask (fields.E180); asked
    in a transaction, the answer waited for another process's write lock and
    turned into "SQLite does not support JSONFields" at the busy timeout."""
    holder, asking = file_connections
    asking.ensure_connection()
    asking.connection.execute("PRAGMA busy_timeout = 100")  # fail fast, not in 20 s
    with holder.cursor() as cursor:
        cursor.execute("BEGIN IMMEDIATE")
        try:
            assert asking.features.supports_json_field is True
        finally:
            cursor.execute("ROLLBACK")
