"""The loop's hints of job edits on SQLite (scheduler.firing.job_edits):
every other connection's commit is one, so a flood of commits that are no
job's (pings) must not wake the loop once each."""

import os
import sqlite3
import time

import pytest

from core import commits, wakeups
from harness.processes import wait_for
from scheduler.firing import job_edits

COMMITS = 300


def wake_ups(listening):
    """The wake-ups set on the loop's flag since the last call."""
    try:
        return len(os.read(listening.flag.fileno(), 4096))
    except BlockingIOError:
        return 0


@pytest.fixture
def database(tmp_path, monkeypatch):
    path = tmp_path / "watched.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA synchronous=NORMAL")  # as Croniq's connections (no fsync a commit)
    writer.execute("CREATE TABLE t (x)")
    listener = wakeups.CommitListener(path)
    if not listener.delivers:
        pytest.skip("the database's writes cannot be watched here")
    monkeypatch.setattr(wakeups, "_listener", listener)
    # As the loop's: its own connection, looked at when hinted (no watch of its own).
    loops_connection = sqlite3.connect(path, isolation_level=None)
    listening = job_edits.Listening(commits.Commits(lambda: loops_connection))
    assert listening.subscribe()
    yield writer, listening
    listening.close()
    wait_for(lambda: listener.thread is None)  # its watch closed with its last subscription
    loops_connection.close()
    writer.close()


def test_a_flood_of_commits_wakes_the_loop_at_most_every_50_ms(database):
    writer, listening = database
    wake_ups(listening)
    began = time.monotonic()
    for _ in range(COMMITS):
        writer.execute("INSERT INTO t VALUES (1)")
        time.sleep(0.001)  # a flood, but commits one by one, as pings come
    seconds = time.monotonic() - began
    woken = [wake_ups(listening)]
    wait_for(lambda: woken.append(wake_ups(listening)) or sum(woken) > 0)
    # A hint held past the flood is still delivered: never dropped.
    time.sleep(job_edits.COMMIT_LOOK_EVERY * 2)
    woken.append(wake_ups(listening))
    assert 1 <= sum(woken) <= seconds / job_edits.COMMIT_LOOK_EVERY + 2


def test_after_a_quiet_moment_a_commit_wakes_the_loop_at_once(database):
    writer, listening = database
    time.sleep(job_edits.COMMIT_LOOK_EVERY)  # whatever came before is past its hold
    wake_ups(listening)
    # Its hold made long: a commit held for it would wake the loop a minute
    # later; one that comes after a quiet moment wakes it at once.
    listening.subscription.every = 60.0
    writer.execute("INSERT INTO t VALUES (1)")
    wait_for(lambda: wake_ups(listening) > 0, timeout=listening.subscription.every / 2)
