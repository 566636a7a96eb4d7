"""Self-healing with real processes: uvicorn, scheduler_loop and agents.

A runner killed while holding a singleton job, a runner restarted under its
own name, a runner that keeps restarting, and counters that outlive a web
restart.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import time

import pytest
import requests

from harness.processes import LAYOUTS, Server, query, start_agent, start_web_and_loop, wait_for
from tests.agent.world import add_execution, issue_token

pytestmark = pytest.mark.e2e

LEASE_TTL = 3
HEARTBEAT = 1
TICK = 0.2
SETTINGS = dict(CRONIQ_LEASE_TTL=LEASE_TTL, CRONIQ_HEARTBEAT_INTERVAL=HEARTBEAT)


@pytest.fixture
def lease_ttl():
    """The cluster's lease TTL; a test parametrizes it to change it."""
    return LEASE_TTL


@pytest.fixture
def cluster(layout, e2e_database, tmp_path, lease_ttl):
    """A real web server and scheduler loop with short leases (two processes,
    or one `serve` as the layout says)."""
    settings = dict(SETTINGS, CRONIQ_LEASE_TTL=lease_ttl)
    server, processes = start_web_and_loop(
        layout, e2e_database, tmp_path, "--interval", str(TICK), CRONIQ_FLAP_THRESHOLD=3, **settings
    )
    token = issue_token(e2e_database)

    class Cluster:
        db = e2e_database

        def agent(self, name, log):
            process = start_agent(
                server.url, token, tmp_path / log, "--name", name, "--labels", "heal",
                "--log-level", "debug",
            )  # fmt: skip
            processes.append(process)
            return process

    Cluster.server = server
    yield Cluster()
    for process in reversed(processes):
        # Agents die like machines (no drain wait); the server and loop stop cleanly.
        if process.args[0].endswith("croniq-runner"):
            kill_machine(process)
        else:
            process.stop()


def kill_machine(agent):
    """SIGKILL the agent and the job processes it started, as a dead machine would."""
    children = subprocess.run(
        ["pgrep", "-P", str(agent.popen.pid)], capture_output=True, text=True
    ).stdout.split()
    agent.kill()
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid), signal.SIGKILL)


def execution_rows(db, job):
    """The job's executions, read straight from the database (cheap to poll)."""
    rows = query(
        db,
        "SELECT e.attempt, e.state, r.name, e.lost_reason FROM scheduler_execution e "
        "JOIN scheduler_job j ON j.id = e.job_id "
        "LEFT JOIN runners_runner r ON r.id = e.runner_id "
        "WHERE j.name = %s ORDER BY e.attempt",
        (job,),
    )
    return [dict(attempt=a, state=s, runner=r, lost_reason=lr) for a, s, r, lr in rows]


def audit_events(db, action):
    return query(
        db, "SELECT actor_name, data FROM audit_auditevent WHERE action = %s ORDER BY id", (action,)
    )


def ledger_command(ledger):
    return (
        f'echo "start $CRONIQ_ATTEMPT $(date +%s.%N)" >> {ledger}; sleep 30; echo end >> {ledger}'
    )


@pytest.mark.parametrize("layout", LAYOUTS, indirect=True)
def test_a_killed_runners_singleton_job_moves_to_another_runner_never_running_twice(
    cluster, tmp_path
):
    ledger = tmp_path / "ledger"
    first = cluster.agent("runner-a", "a.log")
    add_execution(cluster.db, "nightly", ledger_command(ledger), labels=["heal"], singleton=True)
    wait_for(lambda: ledger.exists() and "start 1" in ledger.read_text(), message="first run")

    kill_machine(first)
    killed_at = time.time()
    cluster.agent("runner-b", "b.log")

    def second_attempt_running():
        rows = execution_rows(cluster.db, "nightly")
        return len(rows) == 2 and rows[1]["state"] == "running" and rows

    rows = wait_for(second_attempt_running, timeout=LEASE_TTL + 15, message="re-dispatch")
    print(f"re-dispatched {time.time() - killed_at:.2f}s after the kill (lease TTL {LEASE_TTL}s)")

    assert rows[0]["state"] == "lost"
    assert rows[0]["lost_reason"] == "lease_expired"
    assert rows[1]["runner"] == "runner-b"
    starts = wait_for(lambda: ledger_starts(ledger)[1:] and ledger_starts(ledger), message="2nd")
    assert len(starts) == 2
    assert starts[1] > killed_at, "the second run started before the first runner died"
    reaps = audit_events(cluster.db, "execution.reaped")
    assert len(reaps) == 1
    data = reaps[0][1] if isinstance(reaps[0][1], dict) else json.loads(reaps[0][1])
    assert data["reason"] == "lease_expired"


def ledger_starts(ledger):
    return [
        float(line.split()[2])
        for line in ledger.read_text().splitlines()
        if line.startswith("start")
    ]


# A minute's lease: only the takeover can release the old work within half
# of it (a new agent's start on a loaded machine took longer than 3 s).
@pytest.mark.parametrize("lease_ttl", [60])
@pytest.mark.parametrize("layout", LAYOUTS, indirect=True)
def test_a_restarted_runner_takes_over_its_identity_and_its_old_work_is_released_at_once(
    cluster, tmp_path, lease_ttl
):
    ledger = tmp_path / "ledger"
    first = cluster.agent("runner-a", "a1.log")
    add_execution(cluster.db, "long", ledger_command(ledger), labels=["heal"], singleton=True)
    wait_for(lambda: ledger.exists(), message="first run")
    [(runner_id,)] = query(cluster.db, "SELECT id FROM runners_runner")

    kill_machine(first)
    cluster.agent("runner-a", "a2.log")

    def released():
        rows = execution_rows(cluster.db, "long")
        return rows[0]["state"] == "lost" and rows

    rows = wait_for(released, timeout=lease_ttl / 2, message="release")
    assert rows[0]["lost_reason"] == "runner_superseded"  # not lease_expired
    wait_for(lambda: len(execution_rows(cluster.db, "long")) == 2, message="retry created")

    runners = query(cluster.db, "SELECT id, name FROM runners_runner")
    assert [tuple(r) for r in runners] == [(runner_id, "runner-a")]
    assert len(audit_events(cluster.db, "runner.takeover")) == 1


def metric(text, name, **labels):
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = (
        rf"^{re.escape(name)}\{{{re.escape(wanted)}\}} (\S+)$"
        if labels
        else (rf"^{re.escape(name)} (\S+)$")
    )
    match = re.search(pattern, text, re.MULTILINE)
    return float(match.group(1)) if match else None


def test_a_runner_that_keeps_restarting_is_flapping_on_metrics_and_in_the_audit(cluster, tmp_path):
    for restart in range(5):
        agent = cluster.agent("flappy", f"f{restart}.log")
        wait_for(lambda agent=agent: "registered" in agent.output().lower()
                 or "connected" in agent.output().lower(), message="registration")  # fmt: skip
        kill_machine(agent)

    text = requests.get(cluster.server.url + "/metrics", timeout=10).text
    assert metric(text, "croniq_runner_flapping", runner="flappy") == 1.0
    assert metric(text, "croniq_runner_takeovers_total", runner="flappy") == 4.0
    events = audit_events(cluster.db, "runner.flapping")
    assert [actor for actor, _ in events] == ["flappy"]

    # The counters come from the database: a restarted web process reports the same.
    port = cluster.server.port
    cluster.server.stop()
    restarted = Server(cluster.db, tmp_path / "web2.log", port=port, **SETTINGS).wait_ready()
    try:
        again = requests.get(restarted.url + "/metrics", timeout=10).text
        assert metric(again, "croniq_runner_takeovers_total", runner="flappy") == 4.0
        assert metric(again, "croniq_runner_flapping", runner="flappy") == 1.0
    finally:
        restarted.stop()
