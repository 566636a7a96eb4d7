"""An idle install on SQLite sleeps between commits (real processes).

On Linux the loop and its notifier block until the database's log is
written (`core.commits.FileWrites`) instead of looking every 100 and
50 ms. What they cost at rest is mostly how often they wake: each wake-up
of a thread is a voluntary context switch, counted by the kernel.
"""

import sys
import time
from pathlib import Path

import pytest

from harness.processes import on_postgres, start_loop, wait_for

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's"),
    pytest.mark.skipif(on_postgres(), reason="PostgreSQL's waiters block on their sockets"),
]

# A second's wake-ups: a loop looking for commits every 100 ms wakes at
# least 10 times in each, its notifier looking every 50 ms 20 times; one
# waiting for commits has quiet seconds, once its start-up is over.
MAIN_THREAD_AT_MOST = 7
NOTIFIER_AT_MOST = 10
# How long quiet seconds are looked for: start-up (first ticks,
# housekeeping) takes longer on a loaded machine.
PATIENCE = 30.0


def children(pid):
    """Pids of the processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.name.isdigit() and int(stat[1]) == pid:
            found.append(int(entry.name))
    return found


def wakes(pid, thread=None):
    """Voluntary context switches of a process's threads (or of one)."""
    threads = [thread] if thread is not None else list(Path(f"/proc/{pid}/task").iterdir())
    total = 0
    for task in threads:
        status = (Path(f"/proc/{pid}/task") / str(task)).joinpath("status").read_text()
        total += int(status.split("voluntary_ctxt_switches:")[1].split()[0])
    return total


def notifier_of(loop_pid):
    """The loop's notifier process (multiprocessing, spawned)."""
    for child in children(loop_pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue  # it has ended since the listing
        if b"spawn_main" in command:  # multiprocessing.spawn; not its resource tracker
            return child
    return None


def quietest_seconds(loop_pid, notifier, patience):
    """(the fewest wake-ups of the loop's main thread in one second, and of
    the notifier's process), looking second by second until both are under
    their bounds or `patience` seconds have passed."""
    fewest = [float("inf"), float("inf")]
    deadline = time.monotonic() + patience
    before = wakes(loop_pid, loop_pid), wakes(notifier)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        after = wakes(loop_pid, loop_pid), wakes(notifier)
        for index, (a, b) in enumerate(zip(before, after, strict=True)):
            fewest[index] = min(fewest[index], b - a)
        before = after
        if fewest[0] <= MAIN_THREAD_AT_MOST and fewest[1] <= NOTIFIER_AT_MOST:
            break
    return tuple(fewest)


def test_an_idle_loop_and_its_notifier_on_sqlite_wake_only_when_someone_commits(
    e2e_database, tmp_path
):
    loop = start_loop(e2e_database, tmp_path / "loop.log", CRONIQ_NOTIFIER="1")
    try:
        wait_for(lambda: notifier_of(loop.popen.pid), message="the notifier process")
        notifier = notifier_of(loop.popen.pid)
        main_thread, notifier_process = quietest_seconds(loop.popen.pid, notifier, PATIENCE)
    finally:
        code = loop.stop()  # a failure above is not hidden by a stop during start-up
    assert code == 0, loop.output()
    # Looking for commits every 100 ms, the loop's main thread woke 10.5
    # times a second (2.75 now: its ticks); the notifier's process, looking
    # every 50 ms, 22 (3 now). A polling loop has no quiet second at all.
    assert main_thread <= MAIN_THREAD_AT_MOST, main_thread
    assert notifier_process <= NOTIFIER_AT_MOST, notifier_process
