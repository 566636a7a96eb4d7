"""A singleton timed out on the server while its agent was frozen: the old
process may still run, so its retry waits; the agent, back, kills the job and
reports its end under the old lease, and the retry starts at once instead of
when the old lease runs out. Never two processes of the job at once.
Real server, scheduler loop, agents and jobs."""

import signal
import time

import pytest

from harness.processes import (
    Server,
    drop_database,
    migrated_database,
    query,
    start_agent,
    start_loop,
    wait_for,
)
from tests.agent.world import add_execution, executions, issue_token, ready
from tests.e2e.test_agent import process_gone

pytestmark = pytest.mark.e2e

LEASE_TTL = 60
SETTINGS = dict(CRONIQ_LEASE_TTL=LEASE_TTL, CRONIQ_HEARTBEAT_INTERVAL=1, CRONIQ_TIMEOUT_GRACE=0)
JOB = "frozen-singleton"


@pytest.fixture
def world(tmp_path):
    db = migrated_database(tmp_path)
    processes = []
    try:
        server = Server(db, tmp_path / "web.log", **SETTINGS)
        processes.append(server)
        token = issue_token(db)
        processes.append(start_loop(db, tmp_path / "loop.log", **SETTINGS))
        ready(server)

        def agent(name):
            log = tmp_path / f"{name}.log"
            args = ("--name", name, "--labels", JOB, "--poll-wait", "5")
            started = start_agent(server.url, token, log, *args)
            processes.append(started)
            return started

        yield db, agent
    finally:
        for process in reversed(processes):
            if process.alive():
                process.popen.send_signal(signal.SIGCONT)
            process.stop()
            print(f"--- {process.log_path}\n{process.output()}")
        drop_database(db)


def attempt(db, number):
    found = [run for run in executions(db, JOB) if run["attempt"] == number]
    return found[0] if found else None


def test_the_retry_starts_once_the_agent_confirms_the_kill_not_at_lease_expiry(world, tmp_path):
    db, agent = world
    pids = tmp_path / "pids"
    command = f"echo $$ >> {pids}; exec sleep 30"
    add_execution(db, JOB, command, labels=[JOB], singleton=True, timeout=2, retries=1,
                  retry_backoff=0)  # fmt: skip
    frozen = agent("holder")
    wait_for(lambda: pids.exists() and pids.read_text().strip(), message="the job to start")
    old_pid = int(pids.read_text().split()[0])
    agent("idle")  # would take the retry the moment it is released
    time.sleep(1)  # its first poll waits on the server
    frozen.popen.send_signal(signal.SIGSTOP)  # the agent freezes; its job runs on

    wait_for(
        lambda: attempt(db, 1)["state"] == "timed_out", timeout=15, message="the server timeout"
    )
    first = attempt(db, 1)
    retry = attempt(db, 2)
    assert retry["state"] == "pending"
    time.sleep(2)
    assert attempt(db, 2)["state"] == "pending"  # the old process may still run...
    assert not process_gone(old_pid)  # ...and it does

    frozen.popen.send_signal(signal.SIGCONT)
    wait_for(
        lambda: attempt(db, 2)["claimed_at"], timeout=LEASE_TTL / 3, message="the retry's claim"
    )
    assert process_gone(old_pid)  # killed before its end was reported
    claimed = attempt(db, 2)["claimed_at"]
    # Once the agent confirmed the kill, not at the old lease's expiry (the
    # audit event below says which).
    assert first["lease_expires_at"] - claimed > LEASE_TTL / 2
    [(data,)] = query(
        db, "SELECT data FROM audit_auditevent WHERE action = %s", ("execution.kill_confirmed",)
    )
    assert str(retry["id"]) in str(data)
