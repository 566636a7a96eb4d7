"""croniq-runner against a real server: a process a job started in a session
of its own (`setsid`), or forked twice (a daemon), ends with the run,
whether the command exits, the run times out or the agent is SIGKILLed."""

import contextlib
import os
import signal
import sys

import pytest

from harness.processes import drop_database, migrated_database, start_agent, wait_for
from tests.agent.test_descendants import deaf, escaped
from tests.agent.test_job import gone
from tests.agent.world import add_execution, executions, issue_token, start_server

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: subreaper"),
]


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    url = migrated_database(tmp_path_factory.mktemp("agent-descendants"))
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture(scope="module")
def server(database, tmp_path_factory):
    log = tmp_path_factory.mktemp("agent-descendants-web") / "web.log"
    process = start_server(database, log, CRONIQ_HEARTBEAT_INTERVAL=0.5)
    yield process
    process.stop()


@pytest.fixture
def agent(server, database, tmp_path, request):
    """Starts one agent labelled after the test; stopped, its log shown, at the end."""
    label = request.node.name[:60]
    started = []

    def start(*args):
        argv = ["--name", label, "--labels", label, "--poll-wait", "2", *args]
        token = issue_token(database, label)
        started.append(start_agent(server.url, token, tmp_path / "agent.log", *argv))
        return started[-1]

    start.label = label
    yield start
    for process in started:
        process.stop()
        print(f"--- {process.log_path}\n{process.output()}")


@pytest.fixture
def pidfile(tmp_path):
    path = tmp_path / "escaped.pid"
    yield path
    if path.exists() and path.read_text().strip() and not gone(int(path.read_text()), 0.1):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(path.read_text()), signal.SIGKILL)


def pid_in(pidfile):
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), message="the pid")
    return int(pidfile.read_text())


@pytest.mark.parametrize(
    "started",
    [
        pytest.param(lambda pidfile: f"{escaped(pidfile)} echo started", id="setsid"),
        # The subshell exits at once: its child is orphaned, not the shell's.
        pytest.param(lambda pidfile: f"({escaped(pidfile)}) ; echo started", id="forked-twice"),
    ],
)
def test_a_run_that_exits_ends_the_process_it_left_running(database, agent, pidfile, started):
    add_execution(database, agent.label, started(pidfile), labels=[agent.label])
    process = agent()
    pid = pid_in(pidfile)
    wait_for(lambda: " reported: " in process.output(), message="the report")
    [run] = executions(database, agent.label)
    assert (run["state"], run["exit_code"], run["log"]) == ("succeeded", 0, "started\n")
    assert gone(pid, timeout=5)


def test_a_timed_out_run_ends_the_process_it_started_in_a_session_of_its_own(
    database, agent, pidfile
):
    command = f"{escaped(pidfile)} echo started; wait"
    add_execution(database, agent.label, command, labels=[agent.label], timeout=1)
    process = agent("--kill-grace", "1")
    pid = pid_in(pidfile)
    wait_for(lambda: " reported: " in process.output(), message="the report")
    [run] = executions(database, agent.label)
    assert run["state"] == "timed_out"
    assert gone(pid, timeout=5)


def test_a_process_deaf_to_sigterm_in_a_session_of_its_own_dies_with_the_killed_agent(
    database, agent, pidfile
):
    command = f"{deaf(pidfile)} wait"
    add_execution(database, agent.label, command, labels=[agent.label])
    process = agent("--kill-grace", "1")
    pid = pid_in(pidfile)
    process.popen.kill()  # SIGKILL: the agent gets no say
    process.popen.wait()
    # The supervisor's grace (at most --kill-grace) and its SIGKILL.
    assert gone(pid, timeout=10)
