"""Every process a job starts ends with its run, also one that left the job's
process group with `setsid` or was forked twice: when the command exits, when
the run is cancelled or times out, and when the agent is SIGKILLed.

Real processes throughout (Linux: the supervisor is a child subreaper).
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from croniq_runner.job import Job
from tests.agent.test_job import RecordingServer, gone

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: subreaper")


def escaped(pidfile):
    """Shell that starts a process in a session of its own, out of the job's
    output pipe (only a kill that finds it outside the job's process group
    can end it), and goes on once that process has written its pid."""
    return (
        f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' >/dev/null 2>&1 & "
        f"until [ -s {pidfile} ]; do sleep 0.01; done;"
    )


def deaf(pidfile):
    """The same, deaf to SIGTERM (its pid is written once the trap is set):
    only SIGKILL ends it."""
    return (
        f"setsid sh -c 'trap \"\" TERM; echo $$ > {pidfile}; while :; do sleep 0.1; done' "
        f">/dev/null 2>&1 & until [ -s {pidfile} ]; do sleep 0.01; done;"
    )


@pytest.fixture
def pidfile(tmp_path):
    """Where a job writes the pid of what it started; that process is killed
    at the end if the test left it alive."""
    path = tmp_path / "escaped.pid"
    yield path
    if path.exists() and path.read_text().strip() and not gone(int(path.read_text()), 0.1):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(path.read_text()), signal.SIGKILL)


def escaped_pid(pidfile, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pidfile.exists() and pidfile.read_text().strip():
            return int(pidfile.read_text())
        time.sleep(0.02)
    raise AssertionError("the job did not write the pid")


def start_job(command, tmp_path, **assignment):
    done = threading.Event()
    job = Job(
        {"id": 5, "lease": 1, "command": command, **assignment},
        client=RecordingServer(),
        session="s",
        work_dir=str(tmp_path),
        on_done=lambda job: done.set(),
        on_unauthorized=lambda error: None,
        giving_up=threading.Event(),
    )
    job.start()
    return job, done


def watch(job, done, kill_grace, timeout=15.0):
    """The agent's watchdog, by hand, until the job has ended."""
    deadline = time.monotonic() + timeout
    while not done.wait(0.05):
        assert time.monotonic() < deadline, "the job did not end"
        job.tick(time.monotonic(), kill_grace=kill_grace)


def test_a_process_in_a_session_of_its_own_ends_when_the_command_exits(tmp_path, pidfile):
    job, done = start_job(escaped(pidfile), tmp_path)
    assert done.wait(10)
    assert gone(escaped_pid(pidfile), timeout=5)
    assert job.process.returncode == 0


def test_a_process_forked_twice_into_a_session_of_its_own_ends_with_the_command(tmp_path, pidfile):
    # The subshell exits at once: its child is orphaned, not the shell's.
    job, done = start_job(f"({escaped(pidfile)})", tmp_path)
    assert done.wait(10)
    assert gone(escaped_pid(pidfile), timeout=5)


def test_a_cancel_ends_the_process_that_left_the_group(tmp_path, pidfile):
    job, done = start_job(f"{escaped(pidfile)} wait", tmp_path)
    pid = escaped_pid(pidfile)
    assert job.kill("cancel", grace=30)
    watch(job, done, kill_grace=30)
    assert gone(pid, timeout=5)
    [finish] = job.client.bodies("finish")
    assert finish["error"].startswith("cancelled on the server's request")


def test_a_timeout_kills_a_process_that_left_the_group_and_ignores_sigterm(tmp_path, pidfile):
    job, done = start_job(f"{deaf(pidfile)} wait", tmp_path, timeout=1)
    pid = escaped_pid(pidfile)
    watch(job, done, kill_grace=0.5)
    assert gone(pid, timeout=5)
    [finish] = job.client.bodies("finish")
    assert finish["timed_out"] is True


AGENT = """
import sys, threading
from croniq_runner.job import Job

class Server:
    def post(self, path, body, timeout):
        return {"state": "succeeded"}

job = Job(
    {"id": 1, "lease": 1, "command": sys.argv[1]},
    client=Server(),
    session="s",
    work_dir=sys.argv[2],
    on_done=lambda job: None,
    on_unauthorized=lambda error: None,
    giving_up=threading.Event(),
    orphan_grace=0.5,
)
job.start()
threading.Event().wait()
"""


@pytest.mark.parametrize("shell", [escaped, deaf], ids=["honours-sigterm", "ignores-sigterm"])
def test_a_process_that_left_the_group_dies_with_its_agent_killed_by_sigkill(
    tmp_path, pidfile, shell
):
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, f"{shell(pidfile)} wait", str(tmp_path)],
        cwd=ROOT,
    )
    try:
        pid = escaped_pid(pidfile)
    finally:
        agent.kill()  # SIGKILL: the agent gets no say
        agent.wait()
    assert gone(pid, timeout=5)
