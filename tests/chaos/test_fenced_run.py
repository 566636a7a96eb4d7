"""A partition that heals just after a runner fenced its job.

The runner cannot renew its lease, so it kills its job before the lease can
expire on the server (self-fencing, docs/design.md §2). The network comes back
a moment later, while the server still counts the lease as held. The
scheduled instant must still get its run: the kill was the runner's doing,
not the job's, so the execution is lost and retried like any execution whose
runner vanished (invariant 5), never settled as the job's own failure.
"""

import time

import pytest

from harness.processes import (
    Server,
    drop_database,
    manage,
    migrated_database,
    query,
    start_agent,
    start_loop,
    wait_for,
)
from harness.tcp_proxy import TcpProxy
from tests.chaos.harness import SETTINGS, kill_machine, wait_healthy

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

# A lease long enough that the runner's fence margin (a third of it) leaves
# the healed network seconds to report before the server would reap.
FENCE_SETTINGS = {**SETTINGS, "CRONIQ_LEASE_TTL": 15}

JOB = """
jobs:
  - name: fenced
    schedule: "0 0 1 1 *"
    command: "sleep 30"
    labels: [fence]
    singleton: true
"""


@pytest.fixture
def database(tmp_path):
    url = migrated_database(tmp_path)
    yield url
    drop_database(url)


def attempts(db):
    return query(
        db,
        "SELECT e.id, e.attempt, e.state, e.error FROM scheduler_execution e "
        "JOIN scheduler_job j ON j.id = e.job_id WHERE j.name = 'fenced' ORDER BY e.attempt",
    )


def test_a_job_its_runner_fenced_is_retried_when_the_network_heals_before_the_lease_expires(
    database, tmp_path
):
    server = wait_healthy(Server(database, tmp_path / "web.log", **FENCE_SETTINGS))
    loop = start_loop(database, tmp_path / "loop.log", "--interval", "0.2", **FENCE_SETTINGS)
    proxy = TcpProxy(server.port)
    agent = None
    try:
        path = tmp_path / "jobs.yaml"
        path.write_text(JOB)
        manage(database, "apply", str(path))
        token = manage(database, "create_runner_token", "fence").stdout.strip().splitlines()[-1]
        agent = start_agent(
            proxy.url, token, tmp_path / "agent.log",
            "--name", "fenced-runner", "--labels", "fence", "--poll-wait", "2",
        )  # fmt: skip
        manage(database, "shell", "-c", RUN_NOW)
        wait_for(lambda: "started (job fenced" in agent.output(), message="the run to start")
        [(first_id, _, _, _)] = attempts(database)

        proxy.cut()
        wait_for(
            lambda: f"execution {first_id}: killed by the runner" in agent.output(),
            timeout=30,
            message="the runner to fence its job",
        )
        proxy.heal()
        wait_for(lambda: attempts(database)[0][2] != "running", timeout=20, message="settled")
        time.sleep(2)  # a retry, if any, is created in the same transaction
        rows = attempts(database)
    finally:
        if agent is not None:
            kill_machine(agent)  # and the retry's `sleep 30`
        proxy.close()
        loop.stop()
        server.stop()

    first = rows[0]
    assert first[2] == "lost", f"the fenced run was settled {first[2]!r}: {first[3]!r}"
    assert len(rows) == 2 and rows[1][1] == 2, f"no retry of the fenced run: {rows}"


RUN_NOW = """
from django.utils import timezone
from scheduler.models import Job
from scheduler.runs import operations
operations.run_now(Job.objects.get(name="fenced"), actor=None, now=timezone.now())
"""
