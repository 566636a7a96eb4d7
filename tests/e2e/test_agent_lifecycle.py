"""croniq-runner's timing and its jobs' lives against a real server: leases
shorter than the default, jobs that die with their agent, a restart that
ends what a killed agent left running."""

import pytest

from tests.agent.world import executions, start_server, token_and_executions
from tests.e2e.processes import create_database, drop_database, manage, start_agent, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    url = create_database(tmp_path_factory.mktemp("agent-lifecycle"))
    try:
        manage(url, "migrate", "--no-input")
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
