"""croniq-runner when the network or the server fails: partition, crash, late start."""

import time

import pytest

from harness.processes import (
    Server,
    drop_database,
    free_port,
    migrated_database,
    start_agent,
    start_loop,
    wait_for,
)
from harness.tcp_proxy import TcpProxy
from tests.agent.world import executions, ready, start_server, token_and_executions

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]

# A singleton job that writes when each run starts and ends (also when it is
# terminated) to a ledger. The first attempt runs long, retries briefly.
LEDGER_JOB = (
    'log() { echo "$1 $CRONIQ_EXECUTION_ID $CRONIQ_ATTEMPT $(date +%s.%N)" >> {ledger}; }; '
    "log start; trap 'log end; exit 143' TERM; "
    'n=150; [ "$CRONIQ_ATTEMPT" -gt 1 ] && n=5; '
    "i=0; while [ $i -lt $n ]; do sleep 0.1; i=$((i+1)); done; log end"
)


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    """One migrated database for the module; each test has its own jobs,
    labels, runner names and server processes."""
    url = migrated_database(tmp_path_factory.mktemp("agent-faults"))
    try:
        yield url
    finally:
        drop_database(url)


def read_ledger(path):
    """{(execution id, event): unix time}"""
    if not path.exists():
        return {}
    events = {}
    for line in path.read_text().splitlines():
        event, execution_id, _attempt, at = line.split()
        events[(int(execution_id), event)] = float(at)
    return events


def show(*processes):
    for process in processes:
        print(f"--- {process.log_path}\n{process.output()}")


def test_a_partitioned_agent_kills_its_singleton_job_before_the_lease_expires(database, tmp_path):
    db = database
    fast = {"CRONIQ_LEASE_TTL": 3, "CRONIQ_HEARTBEAT_INTERVAL": 0.5, "CRONIQ_TICK_INTERVAL": 0.2}
    server = Server(db, tmp_path / "web.log", **fast)
    loop = start_loop(db, tmp_path / "loop.log", **fast)
    ledger = tmp_path / "ledger"
    job = dict(
        job="guarded",
        command=LEDGER_JOB.replace("{ledger}", str(ledger)),
        labels=["p"],
        singleton=True,
    )
    proxy = behind_proxy = direct = None
    try:
        token, [first_id] = token_and_executions(db, "partitioned", job)
        proxy = TcpProxy(ready(server).port)
        behind_proxy = start_agent(
            proxy.url, token, tmp_path / "a.log", "--name", "a", "--labels", "p", "--poll-wait", "2"
        )
        wait_for(lambda: (first_id, "start") in read_ledger(ledger), message="the first run")
        proxy.cut()
        # Only now a second runner may exist: it can take nothing but a re-dispatch.
        direct = start_agent(
            server.url,
            token,
            tmp_path / "b.log",
            "--name",
            "b",
            "--labels",
            "p",
            "--poll-wait",
            "2",
        )
        wait_for(
            lambda: "lease could not be renewed" in behind_proxy.output(),
            timeout=10,
            message="the partitioned agent to fence its job",
        )
        wait_for(lambda: " reported: succeeded" in direct.output(), message="the re-dispatched run")
        proxy.heal()
        wait_for(
            lambda: "server refused the report" in behind_proxy.output(),
            timeout=30,
            message="the fenced run to be reported after the partition healed",
        )

        first, second = executions(db, "guarded")
        events = read_ledger(ledger)
        # The job died before the server could consider the lease gone...
        assert events[(first_id, "end")] < first["lease_expires_at"]
        assert first["state"] == "lost"
        assert first["lost_reason"] == "lease_expired"
        # ...so the retry the reaper dispatched never overlapped it.
        assert (second["attempt"], second["state"]) == (2, "succeeded")
        assert events[(first_id, "end")] < events[(second["id"], "start")]
        # The server's own record agrees: the retry was claimed after the
        # first run's lease had expired and it was reaped.
        assert first["lease_expires_at"] <= first["finished_at"] <= second["claimed_at"]
        assert len(events) == 4
        assert "reconnected" in behind_proxy.output()
        assert behind_proxy.alive()
    finally:
        if proxy is not None:
            proxy.close()
        for process in filter(None, (behind_proxy, direct, loop)):
            process.stop()
        server.stop()
        show(*filter(None, (behind_proxy, direct, loop)))


def test_a_fenced_run_is_lost_and_retried_when_the_network_heals_before_its_lease_expires(
    database, tmp_path
):
    """The kill was the runner's doing, not the job's: the server must settle
    the run lost and retry it, not take the kill for the job's own failure."""
    db = database
    # Fenced 6 s after the last renewal, expired 3 s later: room to heal between.
    fast = {"CRONIQ_LEASE_TTL": 9, "CRONIQ_HEARTBEAT_INTERVAL": 0.5, "CRONIQ_TICK_INTERVAL": 0.2}
    server = Server(db, tmp_path / "web.log", **fast)
    loop = start_loop(db, tmp_path / "loop.log", **fast)
    ledger = tmp_path / "ledger"
    job = dict(
        job="healed",
        command=LEDGER_JOB.replace("{ledger}", str(ledger)),
        labels=["h"],
        singleton=True,
    )
    proxy = agent = None
    try:
        token, [first_id] = token_and_executions(db, "healed", job)
        proxy = TcpProxy(ready(server).port)
        agent = start_agent(
            proxy.url, token, tmp_path / "agent.log", "--name", "h", "--labels", "h",
            "--poll-wait", "2",
        )  # fmt: skip
        wait_for(lambda: (first_id, "start") in read_ledger(ledger), message="the first run")
        proxy.cut()
        wait_for(
            lambda: "lease could not be renewed" in agent.output(),
            timeout=15,
            message="the agent to fence its job",
        )
        proxy.heal()
        healed_at = time.time()

        def retried():
            runs = executions(db, "healed")
            return len(runs) == 2 and runs[1]["state"] == "succeeded" and runs

        first, second = wait_for(retried, timeout=30, message="the retry to run")
        assert healed_at < first["lease_expires_at"]  # the scenario: healed in time
        assert first["state"] == "lost"
        assert first["lost_reason"] == "lease_expired"
        assert second["attempt"] == 2
        events = read_ledger(ledger)
        assert events[(first_id, "end")] < first["lease_expires_at"]
        assert events[(first_id, "end")] < events[(second["id"], "start")]
        assert "reporting in" in agent.output()
    finally:
        if proxy is not None:
            proxy.close()
        for process in filter(None, (agent, loop)):
            process.stop()
        server.stop()
        show(*filter(None, (agent, loop)))


def test_the_agent_waits_for_a_late_server_and_its_job_rides_out_a_server_crash(database, tmp_path):
    db = database
    port = free_port()
    steady = 'i=0; while [ $i -lt 40 ]; do echo "line $i"; sleep 0.1; i=$((i+1)); done'
    token, _ = token_and_executions(db, "crashed", dict(job="steady", command=steady, labels=["r"]))
    url = f"http://127.0.0.1:{port}"
    agent = start_agent(url, token, tmp_path / "agent.log", "--labels", "r", "--poll-wait", "1")
    server = None
    try:
        # No server yet: the agent keeps trying, it does not crash.
        wait_for(lambda: "cannot reach" in agent.output(), message="the agent to retry")
        fast = {"CRONIQ_HEARTBEAT_INTERVAL": 0.5}
        server = start_server(db, tmp_path / "web-1.log", port=port, **fast)
        wait_for(lambda: "started" in agent.output(), message="the job to start")
        time.sleep(0.5)
        server.kill()  # a crash: connections reset, then refused
        time.sleep(0.5)
        # Back with shorter leases: the agent must notice, or it would fence too late.
        server = start_server(db, tmp_path / "web-2.log", port=port, CRONIQ_LEASE_TTL=6, **fast)
        # The agent registers again once it reaches the new server, and the
        # report may get through first: wait for both.
        wait_for(
            lambda: " reported: " in agent.output() and "shorter leases" in agent.output(),
            timeout=30,
            message="the report and the new registration after the restart",
        )

        [run] = executions(db, "steady")
        assert (run["state"], run["exit_code"]) == ("succeeded", 0)
        assert run["log"].splitlines() == [f"line {i}" for i in range(40)]
        output = agent.output()
        assert output.count("cannot reach") == 1
        assert output.count("reached") == 1
        assert output.count("lost connection to") == 1
        assert output.count("reconnected to") == 1
        # ...and learnt, by registering again, that leases are shorter now.
        assert "the server now grants shorter leases (6.0s)" in output
        assert agent.alive()
    finally:
        agent.stop()
        if server is not None:
            server.stop()
        show(agent)
