"""core.commits: whether another SQLite connection committed since the last look."""

import os
import sqlite3
import threading
import time

import pytest

from core import commits


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "commits.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x)")
    yield path, writer
    writer.close()


@pytest.fixture
def closing():
    """Closes the watchers a test makes (their inotify descriptors)."""
    made = []
    yield made.append
    for watcher in made:
        watcher.close()


def test_it_moves_on_the_first_look_then_only_after_another_connection_commits(database, closing):
    path, writer = database
    watcher = commits.own_connection(str(path))
    closing(watcher)

    assert watcher.moved()
    assert not watcher.moved()
    writer.execute("INSERT INTO t VALUES (1)")
    assert watcher.moved()
    assert not watcher.moved()


def test_its_own_commits_do_not_move_it(database):
    path, _ = database
    own = sqlite3.connect(path, isolation_level=None)
    watcher = commits.Commits(lambda: own)
    watcher.moved()

    own.execute("INSERT INTO t VALUES (1)")

    assert not watcher.moved()


def test_a_new_connection_or_an_error_counts_as_moved(database):
    path, _ = database
    opened = [sqlite3.connect(path, isolation_level=None)]
    watcher = commits.Commits(lambda: opened[-1])
    watcher.moved()

    opened.append(sqlite3.connect(path, isolation_level=None))
    assert watcher.moved()
    opened[-1].close()
    assert watcher.moved()  # cannot tell: the caller looks


# -- blocking until the database is written (Linux) --------------------------


def later(action, seconds=0.2):
    thread = threading.Timer(seconds, action)
    thread.start()
    return thread


def test_a_watcher_blocks_until_another_connection_commits(database, closing):
    path, writer = database
    watcher = commits.own_connection(str(path))
    closing(watcher)
    assert watcher.blocks
    assert watcher.wait(5.0)  # the first look: moved

    thread = later(lambda: writer.execute("INSERT INTO t VALUES (1)"))
    started = time.monotonic()
    # True: woken by the commit (its timeout would be False; how soon:
    # bench/wakeups.py's commit_wake), and not before it.
    assert watcher.wait(60.0)
    thread.join()

    assert time.monotonic() - started >= 0.15
    assert not watcher.moved()  # that commit was seen


def test_its_wait_ends_at_its_timeout_or_interrupt_when_nobody_commits(database, closing):
    path, _ = database
    watcher = commits.own_connection(str(path))
    closing(watcher)
    watcher.moved()

    started = time.monotonic()
    assert not watcher.wait(0.3)
    assert time.monotonic() - started >= 0.25  # its timeout ended it

    read, write = os.pipe()
    try:
        thread = later(lambda: os.write(write, b"!"))
        started = time.monotonic()
        assert not watcher.wait(60.0, read)
        thread.join()
        assert time.monotonic() - started < 60.0 / 2  # the interrupt, not the timeout
    finally:
        os.close(read)
        os.close(write)


def test_its_own_commits_wake_it_but_do_not_count(database, closing):
    path, _ = database
    own = sqlite3.connect(path, isolation_level=None)
    watcher = commits.Commits(lambda: own, commits.file_writes(str(path)))
    closing(watcher)
    watcher.moved()

    own.execute("INSERT INTO t VALUES (1)")

    assert not watcher.wait(0.5)  # woken by the write; not another's commit
    own.close()


def test_it_sees_commits_after_the_log_was_deleted_and_made_anew(database, closing):
    path, writer = database
    writer.close()  # the last connection: SQLite deletes the log
    assert not os.path.exists(f"{path}-wal")
    watcher = commits.own_connection(str(path))
    closing(watcher)
    watcher.moved()
    another = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    thread = later(lambda: another.execute("INSERT INTO t VALUES (1)"))
    assert watcher.wait(60.0)
    thread.join()
    another.close()


@pytest.mark.parametrize(
    "name", [":memory:", "file:memorydb_default?mode=memory&cache=shared", "/nonexistent/x.db"]
)
def test_a_database_without_a_file_is_looked_at_in_turn(name):
    assert commits.file_writes(name) is None
    assert not commits.own_connection(name).blocks


def test_a_commit_that_becomes_visible_a_while_after_its_write_is_seen(tmp_path, closing):
    """A writer descheduled between its log write and the log's index
    update (a busy machine) makes its commit visible late: the waiter
    looks again for seconds, not only for the next few milliseconds."""
    path = tmp_path / "late.sqlite3"
    path.touch()
    visible_at = []

    class Raw:  # the commit counter moves 0.3 s after the write
        def execute(self, sql):
            moved = bool(visible_at) and time.monotonic() >= visible_at[0]
            return type("Row", (), {"fetchone": lambda self: (2 if moved else 1,)})()

    raw = Raw()
    watcher = commits.Commits(lambda: raw, commits.file_writes(str(path)))
    closing(watcher)
    watcher.moved()

    def write():
        visible_at.append(time.monotonic() + 0.3)
        with open(f"{path}-wal", "ab") as log:
            log.write(b"frame")

    thread = later(write, 0.1)
    # True: its looks after the write went on until the commit became
    # visible (its settling looks used up, it would wait out its timeout
    # and return False).
    assert watcher.wait(60.0)
    thread.join()
