"""croniq-runner's timing and its jobs' lives against a real server: leases
shorter than the default, jobs that die with their agent, a restart that
ends what a killed agent left running."""

import os
import signal
from pathlib import Path

import pytest

from croniq_runner.ledger import group_members
from harness.processes import (
    BIN,
    Process,
    drop_database,
    migrated_database,
    process_env,
    start_agent,
    wait_for,
)
from tests.agent.world import (
    add_execution,
    executions,
    issue_token,
    start_server,
    token_and_executions,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    url = migrated_database(tmp_path_factory.mktemp("agent-lifecycle"))
    try:
        yield url
    finally:
        drop_database(url)


def show(*processes):
    for process in processes:
        print(f"--- {process.log_path}\n{process.output()}")


def test_a_job_longer_than_a_15s_lease_succeeds_as_its_first_attempt(database, tmp_path):
    timing = {"CRONIQ_LEASE_TTL": 15, "CRONIQ_HEARTBEAT_INTERVAL": 5}
    server = start_server(database, tmp_path / "web.log", **timing)
    agent = None
    try:
        job = dict(job="outlives-lease", command="sleep 22; echo done", labels=["ttl15"])
        token, [execution_id] = token_and_executions(database, "ttl15", job)
        agent = start_agent(server.url, token, tmp_path / "agent.log", "--labels", "ttl15")
        wait_for(lambda: " reported: " in agent.output(), timeout=60, message="the report")
        [run] = executions(database, "outlives-lease")
        assert (run["id"], run["attempt"], run["state"]) == (execution_id, 1, "succeeded")
        assert run["log"] == "done\n"
        assert "lease could not be renewed" not in agent.output()
    finally:
        if agent is not None:
            agent.stop()
            show(agent)
        server.stop()


@pytest.fixture(scope="module")
def server(database, tmp_path_factory):
    log = tmp_path_factory.mktemp("agent-lifecycle-web") / "web.log"
    process = start_server(database, log, CRONIQ_HEARTBEAT_INTERVAL=0.5)
    yield process
    process.stop()


@pytest.fixture
def agents(server, database, tmp_path, request):
    """Start agents with the token in their environment (not on the command
    line), labelled and named after the test, with a state dir of its own."""
    started = []
    label = request.node.name[:60]
    token = issue_token(database, label)

    def start(*args):
        log = tmp_path / f"agent-{len(started)}.log"
        argv = [str(BIN / "croniq-runner"), "--server", server.url, "--name", label]
        argv += ["--labels", label, "--poll-wait", "2"]
        state = tmp_path / "state"
        env = process_env("sqlite:////nonexistent", CRONIQ_TOKEN=token, CRONIQ_STATE_DIR=state)
        started.append(Process([*argv, *args], env, log))
        return started[-1]

    start.label = label
    yield start
    for agent in started:
        agent.stop()
    show(*started)


def group_of(pid):
    """The process group id of `pid`, from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[2])


def job_pid(pidfile):
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), message="the job's pid")
    return int(pidfile.read_text())


def test_a_job_dies_with_its_agent_killed_by_sigkill(database, agents, tmp_path):
    pidfile = tmp_path / "sleep.pid"
    add_execution(
        database, agents.label, f"sleep 300 & echo $! > {pidfile}; wait", labels=[agents.label]
    )
    agent = agents()
    group = group_of(job_pid(pidfile))
    assert group_members(group)
    agent.popen.kill()  # SIGKILL: the agent gets no say
    agent.popen.wait()
    wait_for(lambda: not group_members(group), timeout=3, message="the job's process group to end")


def test_a_job_killed_with_its_agent_runs_its_sigterm_trap_to_the_end(database, agents, tmp_path):
    # The trap prints on the job's output before it writes its file: with
    # the agent (the pipe's reader) gone, the supervisor's drain is what
    # keeps that print from being a SIGPIPE, which would end the job there.
    pidfile, said = tmp_path / "sleep.pid", tmp_path / "said"
    command = (
        f"trap 'echo stopping; echo killed > {said}; exit 143' TERM; "
        f"sleep 300 & echo $! > {pidfile}; wait $!"
    )
    add_execution(database, agents.label, command, labels=[agents.label])
    agent = agents()
    group = group_of(job_pid(pidfile))
    agent.popen.kill()  # SIGKILL: the agent gets no say
    agent.popen.wait()
    wait_for(lambda: not group_members(group), timeout=10, message="the job's process group to end")
    assert said.exists() and said.read_text() == "killed\n"


def test_a_restart_under_the_same_name_first_ends_what_the_killed_run_left(
    database, agents, tmp_path
):
    pidfile = tmp_path / "sleep.pid"
    add_execution(
        database, agents.label, f"sleep 300 & echo $! > {pidfile}; wait", labels=[agents.label]
    )
    first = agents()
    group = group_of(job_pid(pidfile))
    # The agent and the job's supervisor die together, the job itself lives on
    # (the supervisor could not act): only the ledger knows its group now.
    os.kill(first.popen.pid, signal.SIGSTOP)
    os.kill(group, signal.SIGKILL)  # the supervisor leads the job's group
    first.popen.kill()
    first.popen.wait()
    assert group_members(group)
    second = agents()
    wait_for(lambda: "connected to" in second.output(), timeout=20, message="the restart")
    assert not group_members(group)
    output = second.output()
    ended = output.index(f"ended process group {group} of execution")
    assert ended < output.index("connected to")


def environment_probe(agent_pid):
    return (
        'echo "uid=$(id -u) home=$HOME token=${CRONIQ_TOKEN:-none}"; '
        f"if cat /proc/{agent_pid}/environ > /dev/null 2>&1; then "
        f"echo \"readable, token copies: $(tr '\\0' '\\n' < /proc/{agent_pid}/environ "
        '| grep -c crq_)"; '
        "else echo unreadable; fi"
    )


def test_a_job_finds_the_token_neither_in_its_environment_nor_in_the_agents(database, agents):
    agent = agents()
    wait_for(lambda: "connected to" in agent.output(), message="the agent to register")
    add_execution(database, agents.label, environment_probe(agent.popen.pid), labels=[agents.label])
    wait_for(lambda: " reported: " in agent.output(), message="the report")
    [run] = executions(database, agents.label)
    assert run["log"] == f"uid=0 home={os.environ['HOME']} token=none\nreadable, token copies: 0\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="--run-as needs the agent to run as root")
def test_a_job_run_as_another_user_cannot_read_the_agents_process(database, agents):
    agent = agents("--run-as", "nobody")
    wait_for(lambda: "connected to" in agent.output(), message="the agent to register")
    add_execution(database, agents.label, environment_probe(agent.popen.pid), labels=[agents.label])
    wait_for(lambda: " reported: " in agent.output(), message="the report")
    [run] = executions(database, agents.label)
    assert run["log"] == "uid=65534 home=/nonexistent token=none\nunreadable\n"
    assert run["state"] == "succeeded"
    assert "jobs run as nobody (uid 65534)" in agent.output()
