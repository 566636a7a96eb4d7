"""croniq_project/sqlite: a connection marked eager takes SQLite's write lock
as soon as it is free, and still gives up after its busy timeout."""

import threading
import time

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


def hold_write_lock(holder, seconds, taken):
    """Holds the write lock for `seconds`; returns (monotonic time before
    its COMMIT, after it): the lock is released between the two."""
    holder.inc_thread_sharing()  # opened here, used by the thread below
    with holder.cursor() as cursor:
        cursor.execute("BEGIN IMMEDIATE")
        taken.set()
        time.sleep(seconds)
        committing = time.monotonic()
        cursor.execute("COMMIT")
    return committing, time.monotonic()


def test_an_eager_connection_takes_the_write_lock_right_after_its_release(file_connections):
    holder, eager = file_connections
    eager.eager_write_lock = True
    holder.ensure_connection()
    taken, released = threading.Event(), []
    thread = threading.Thread(target=lambda: released.append(hold_write_lock(holder, 0.25, taken)))
    thread.start()
    taken.wait(5)
    eager._start_transaction_under_autocommit()  # what atomic() calls
    got = time.monotonic()
    eager.cursor().execute("COMMIT")
    thread.join()
    # SQLite's own busy handler sleeps up to 100 ms between tries. (The
    # eager connection may take the lock before the holder's COMMIT
    # returns: timed from both ends of it.)
    committing, committed = released[0]
    assert committing <= got
    assert got - committed < 0.02
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
    assert 0.2 <= time.monotonic() - started < 2
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
