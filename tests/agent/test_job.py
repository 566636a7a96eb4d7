"""One execution on a real subprocess, reporting to a recording client."""

import os
import threading
import time
from pathlib import Path

from croniq_runner.client import Conflict, Transient
from croniq_runner.job import Job


class RecordingServer:
    """Stands in for the HTTP client: records calls, can fail some first."""

    def __init__(self, fail_first=0, conflict_on=None):
        self.calls = []
        self.fail_first = fail_first
        self.conflict_on = conflict_on
        self.lock = threading.Lock()

    def post(self, path, body, timeout):
        with self.lock:
            self.calls.append((path.rsplit("/", 1)[1], dict(body)))
            if self.fail_first:
                self.fail_first -= 1
                raise Transient("connection refused")
        if self.conflict_on and path.endswith(self.conflict_on):
            raise Conflict("HTTP 409: stale lease", 409)
        return {"ok": True} if path.endswith("/logs") else {"state": "succeeded"}

    def bodies(self, call):
        return [body for name, body in self.calls if name == call]


def gone(pid, timeout=2.0):
    """True once `pid` no longer runs (a zombie awaiting init counts as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        status = Path(f"/proc/{pid}/status")
        if status.exists() and "State:\tZ" in status.read_text():
            return True
        time.sleep(0.05)
    return False


def run_job(command, server, work_dir, timeout=10, **assignment):
    done = threading.Event()
    job = Job(
        {"id": 9, "lease": 4, "command": command, "job": "j", "attempt": 1, **assignment},
        client=server,
        session="s1",
        work_dir=str(work_dir),
        on_done=lambda job: done.set(),
        on_unauthorized=lambda error: None,
        giving_up=threading.Event(),
    )
    job.start()
    assert done.wait(timeout), "the job did not end"
    return job


def test_output_is_shipped_in_order_then_finish_reports_the_exit_code(tmp_path):
    server = RecordingServer()
    run_job("echo one; echo two >&2; exit 5", server, tmp_path)
    logs = server.bodies("logs")
    assert "".join(body["data"] for body in logs) == "one\ntwo\n"
    assert [body["seq"] for body in logs] == list(range(1, len(logs) + 1))
    assert all((body["session"], body["lease"]) == ("s1", 4) for body in logs)
    [finish] = server.bodies("finish")
    assert finish == {"session": "s1", "lease": 4, "exit_code": 5}
    assert server.calls[-1][0] == "finish"


def test_a_failed_log_post_is_retried_with_the_same_seq(tmp_path):
    server = RecordingServer(fail_first=2)
    run_job("echo hello", server, tmp_path)
    assert [(body["seq"], body["data"]) for body in server.bodies("logs")] == [(1, "hello\n")] * 3
    assert len(server.bodies("finish")) == 1


def test_a_stale_lease_stops_the_output_but_the_end_is_still_reported(tmp_path):
    server = RecordingServer(conflict_on="/logs")
    job = run_job("echo a; sleep 1.2; echo b", server, tmp_path)
    assert len(server.bodies("logs")) == 1  # after the 409 no more output is sent
    assert job.stale
    assert len(server.bodies("finish")) == 1


def test_what_the_shell_leaves_running_is_killed_when_it_exits(tmp_path):
    pidfile = tmp_path / "pid"
    # Detached from the output pipe: only the group kill can end it. The run
    # ends with its shell, well before the leftover's 60 s.
    command = f"sleep 60 >/dev/null 2>&1 & echo $! > {pidfile}; echo parent done"
    run_job(command, RecordingServer(), tmp_path, timeout=30)
    assert gone(int(pidfile.read_text()), timeout=30)


def test_a_command_that_cannot_start_is_reported_without_an_exit_code(tmp_path):
    server = RecordingServer()
    run_job("true", server, tmp_path / "missing-dir")
    [finish] = server.bodies("finish")
    assert finish["exit_code"] is None
    assert finish["error"].startswith("could not start:")


def test_a_job_ignoring_sigterm_is_killed_after_the_grace(tmp_path):
    server = RecordingServer()
    done = threading.Event()
    job = Job(
        {
            "id": 1,
            "lease": 1,
            "command": f"trap '' TERM; touch {tmp_path / 'ready'}; while true; do sleep 0.1; done",
        },
        client=server,
        session="s",
        work_dir=str(tmp_path),
        on_done=lambda job: done.set(),
        on_unauthorized=lambda error: None,
        giving_up=threading.Event(),
    )
    job.start()
    deadline = time.monotonic() + 10
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.02)  # the shell has installed its trap once the file exists
    killed_at = time.monotonic()
    assert job.kill("cancel", grace=0.5)
    while not done.wait(0.05):  # the agent's watchdog, by hand
        job.tick(time.monotonic(), kill_grace=0.5)
    assert time.monotonic() - killed_at >= 0.5
    [finish] = server.bodies("finish")
    assert finish["exit_code"] is None
    assert finish["error"] == "cancelled on the server's request; terminated by SIGKILL"


def start_sleeper(server, tmp_path, giving_up):
    done = threading.Event()
    job = Job(
        {"id": 3, "lease": 2, "command": "sleep 30"},
        client=server,
        session="s",
        work_dir=str(tmp_path),
        on_done=lambda job: done.set(),
        on_unauthorized=lambda error: None,
        giving_up=giving_up,
    )
    job.start()
    return job, done


def test_a_fenced_job_is_reported_only_once_its_lease_has_lapsed(tmp_path):
    server = RecordingServer()
    job, done = start_sleeper(server, tmp_path, threading.Event())
    report_after = time.monotonic() + 1.0
    assert job.give_up_lease(grace=0.2, report_after=report_after)
    assert not job.holds_lease
    assert done.wait(5)
    assert time.monotonic() >= report_after
    [finish] = server.bodies("finish")
    assert "lease could not be renewed" in finish["error"]


def test_a_fenced_job_is_left_unreported_when_the_agent_exits_first(tmp_path):
    server = RecordingServer()
    giving_up = threading.Event()
    job, done = start_sleeper(server, tmp_path, giving_up)
    job.give_up_lease(grace=0.2, report_after=time.monotonic() + 60)
    wait_until = time.monotonic() + 5
    while not job.waiting_for_lapse and time.monotonic() < wait_until:
        time.sleep(0.05)
    assert job.waiting_for_lapse
    giving_up.set()
    assert done.wait(5)
    assert server.bodies("finish") == []
