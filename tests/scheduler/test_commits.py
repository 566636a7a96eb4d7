"""scheduler.commits: whether another SQLite connection committed since the last look."""

import sqlite3

import pytest

from scheduler import commits


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "commits.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x)")
    yield path, writer
    writer.close()


def test_it_moves_on_the_first_look_then_only_after_another_connection_commits(database):
    path, writer = database
    watcher = commits.own_connection(str(path))

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
