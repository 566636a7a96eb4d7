"""A job's `stdin`, `run_as` and `run_on_register` through real processes
(docs/design.md §4, §13): a web server and loop of the current code, the
previous release's agent beside the current one.

The previous release's agent ignores assignment fields it does not know:
handed a `stdin` job it would run the command without its input, a
`run_as` job as its own user. It announces no features, so it is handed
neither: they wait for the current agent, which runs them right. The
current agent announces run_as only when its --allow-run-as names a user:
without it the run_as job waits for one that does. Each agent's start runs
the job that runs on register once, on that agent.
"""

import os

import pytest

from harness.previous_release import start_previous_agent
from harness.processes import (
    Process,
    Server,
    drop_database,
    manage,
    migrated_database,
    start_agent,
    start_loop,
    wait_for,
)
from tests.agent.world import ready
from tests.e2e.test_upgrade_mixed_versions import (  # noqa: F401 - the fixture is autouse
    SERVER_ENV,
    Api,
    credentials,
    previous_release_built,
)

pytestmark = pytest.mark.e2e

LABEL = "features"
NEVER = "0 0 1 1 *"  # a schedule that never comes during the test: triggers run the jobs
JOBS = {
    "plain": {"command": "echo plain"},
    "fed": {"command": "cat; echo '<end>'", "stdin": "line one\n100% done\n"},
    "as-nobody": {"command": "id -un", "run_as": "nobody"},
}
BOOT = {"name": "boot", "command": 'echo "boot on $CRONIQ_JOB"', "run_on_register": True}


def states(api: Api, runs: dict[str, int]) -> dict[str, str]:
    return {name: api.call("GET", f"executions/{run}")["state"] for name, run in runs.items()}


def log(api: Api, execution_id: int) -> str:
    return api.call("GET", f"executions/{execution_id}/log")["data"]


def boot_runs(api: Api) -> list[dict]:
    return api.call("GET", "executions", params={"job": "boot"})["items"]


@pytest.mark.skipif(os.geteuid() != 0, reason="run_as needs the agent to run as root")
def test_only_an_agent_that_announced_stdin_or_run_as_runs_such_jobs(tmp_path):
    db = migrated_database(tmp_path)
    server = Server(db, tmp_path / "web.log", **SERVER_ENV)
    loop = start_loop(db, tmp_path / "loop.log", **SERVER_ENV)
    agents: list[Process] = []
    try:
        token, key = credentials(manage, db)
        api = Api(ready(server).url, key)
        api.call("POST", "jobs", json={**BOOT, "labels": [LABEL]})
        runs = {}
        for name, fields in JOBS.items():
            api.call(
                "POST", "jobs", json={"name": name, "schedule": NEVER, "labels": [LABEL], **fields}
            )
            runs[name] = api.call("POST", f"jobs/{name}/trigger")["execution_id"]

        common = ("--labels", LABEL, "--capacity", "4", "--poll-wait", "1")
        agents.append(
            start_previous_agent(server.url, token, tmp_path / "old.log", "--name", "old", *common)
        )
        wait_for(
            lambda: states(api, {"plain": runs["plain"]})["plain"] == "succeeded",
            timeout=60,
            message="the previous agent to run the plain job",
        )
        # Ready since before the agent started, and it has polled since with
        # room for all: had they been handed to it, they would have run.
        wait_for(
            lambda: [r["state"] for r in boot_runs(api)] == ["succeeded"],
            timeout=60,
            message="the previous agent's start to run the boot job",
        )
        assert states(api, runs) == {"plain": "succeeded", "fed": "pending", "as-nobody": "pending"}

        # The current agent allowing no user: stdin, but no run_as.
        agents.append(
            start_agent(server.url, token, tmp_path / "new.log", "--name", "new", *common)
        )
        wait_for(
            lambda: [r["state"] for r in boot_runs(api)] == ["succeeded"] * 2,
            timeout=60,
            message="the current agent's start to run the boot job",
        )
        wait_for(
            lambda: states(api, {"fed": runs["fed"]})["fed"] == "succeeded",
            timeout=60,
            message="the current agent to run the stdin job",
        )
        assert states(api, runs)["as-nobody"] == "pending"

        allowing = ("--allow-run-as", "nobody")
        agents.append(
            start_agent(
                server.url, token, tmp_path / "allowed.log", "--name", "allowed", *common, *allowing
            )
        )
        wait_for(
            lambda: set(states(api, runs).values()) == {"succeeded"},
            timeout=60,
            message="the agent allowing nobody to run the run_as job",
        )
        assert log(api, runs["fed"]) == "line one\n100% done\n<end>\n"
        assert log(api, runs["as-nobody"]) == "nobody\n"
        assert api.call("GET", f"executions/{runs['fed']}")["runner"] == "new"
        assert api.call("GET", f"executions/{runs['as-nobody']}")["runner"] == "allowed"

        wait_for(
            lambda: [r["state"] for r in boot_runs(api)] == ["succeeded"] * 3,
            timeout=60,
            message="the allowing agent's start to run the boot job",
        )
        boots = boot_runs(api)
        assert sorted(r["runner"] for r in boots) == ["allowed", "new", "old"]
        assert {r["trigger"] for r in boots} == {"register"}
        assert all(log(api, r["id"]) == "boot on boot\n" for r in boots)
        for agent in agents:
            assert agent.alive(), agent.output()
    finally:
        codes = [agent.stop() for agent in agents]
        for agent in agents:
            print(f"--- agent\n{agent.output()}")
        for process in (server, loop):
            process.stop()
        drop_database(db)
    assert codes == [0] * len(agents)
