"""The previous release's agent against the current server, and the current
agent against the previous release's server (harness/previous_release.py).

Operators upgrade a server and its runners one after the other, never at
once: for the upgrade's length one side speaks the protocol of a release
ago. The first two tests run the same four jobs through a real web server
and scheduler loop of one release and a real agent of the other, set up and
read only through the management API (a contract too): a success with its
output, a failure with its exit code, a run killed at its timeout and one
an operator cancels. The third upgrades the server under a running agent
of the previous release.
"""

import json
import subprocess
from collections.abc import Callable

import pytest
import requests

from harness.previous_release import (
    PreviousServer,
    compiled_sources,
    current_code_imported,
    previous_manage,
    previous_migrated_database,
    previous_runner_venv,
    release_tree,
    start_previous_agent,
    start_previous_loop,
)
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

pytestmark = pytest.mark.e2e

# Cancels reach the agent with its next heartbeat.
SERVER_ENV = {"CRONIQ_HEARTBEAT_INTERVAL": 0.5}
LABEL = "mixed"
JOBS = {
    "ok": {"command": 'echo "hello from $CRONIQ_JOB"'},
    "fails": {"command": "echo bad news >&2; exit 7"},
    "times-out": {"command": "echo started; sleep 60", "timeout": 1},
    "cancelled": {"command": "echo waiting; sleep 60"},
}
# What each run must end as, and a line its log must hold.
OUTCOMES = {
    "ok": ("succeeded", 0, "hello from ok"),
    "fails": ("failed", 7, "bad news"),
    "times-out": ("timed_out", None, "started"),
    "cancelled": ("cancelled", None, "waiting"),
}
CREDENTIALS = """
from control.models import ApiKey
from runners.models import RunnerToken
print("CREDENTIALS:" + json.dumps(
    [RunnerToken.issue("mixed")[1], ApiKey.issue("mixed", ["admin"])[1]]
))
"""


@pytest.fixture(scope="module", autouse=True)
def previous_release_built():
    """The release's tree and agent before the first test, not inside one
    that waits on its processes."""
    release_tree()
    previous_runner_venv()


def credentials(manage_command: Callable[..., subprocess.CompletedProcess[str]], db: str):
    """(runner token, admin API key), issued by that release's own code."""
    result = manage_command(db, "shell", "-c", "import json\n" + CREDENTIALS)
    [line] = [line for line in result.stdout.splitlines() if line.startswith("CREDENTIALS:")]
    return json.loads(line.removeprefix("CREDENTIALS:"))


class Api:
    def __init__(self, url: str, key: str) -> None:
        self.url = url + "/api/v1/"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {key}"

    def call(self, method: str, path: str, **kwargs) -> dict:
        answer = self.session.request(method, self.url + path, timeout=30, **kwargs)
        assert answer.ok, f"{method} {path}: {answer.status_code} {answer.text}"
        return answer.json()


def trigger_jobs(api: Api) -> dict[str, int]:
    """The jobs created and each run once now: {name: execution id}."""
    runs = {}
    for name, fields in JOBS.items():
        # A schedule that never comes during the test: only the trigger runs it.
        job = {"name": name, "schedule": "0 0 1 1 *", "labels": [LABEL], **fields}
        api.call("POST", "jobs", json=job)
        runs[name] = api.call("POST", f"jobs/{name}/trigger")["execution_id"]
    return runs


def outcome(api: Api, execution_id: int) -> tuple[str, int | None, str]:
    run = api.call("GET", f"executions/{execution_id}")
    log = api.call("GET", f"executions/{execution_id}/log")["data"]
    return run["state"], run["exit_code"], log


def run_the_jobs(api: Api, start: Callable[..., Process]) -> None:
    """The four jobs through an agent `start` starts, each ending as
    OUTCOMES says; the agent then stops cleanly."""
    runs = trigger_jobs(api)
    agent = start(
        *("--name", "mixed-agent", "--labels", LABEL, "--capacity", "4", "--poll-wait", "5"),
    )
    try:
        cancelled = runs["cancelled"]
        # Its output first: a cancel then ends a run that has been heard from.
        wait_for(
            lambda: "waiting" in api.call("GET", f"executions/{cancelled}/log")["data"],
            timeout=60,
            message="the run to cancel to start",
        )
        api.call("POST", f"executions/{cancelled}/cancel")
        states: dict[str, str] = {}

        def ended() -> bool:
            states.update(
                {n: api.call("GET", f"executions/{run}")["state"] for n, run in runs.items()}
            )
            return all(states[name] == OUTCOMES[name][0] for name in runs)

        try:
            wait_for(ended, timeout=60, message="every run to end as expected")
        except AssertionError as error:
            raise AssertionError(f"{error}; they are {states}") from None
        found = {name: outcome(api, run) for name, run in runs.items()}
        for name, (state, exit_code, line) in OUTCOMES.items():
            assert found[name][:2] == (state, exit_code), (name, found[name])
            assert line in found[name][2], (name, found[name])
        assert agent.alive(), agent.output()
    finally:
        code = agent.stop()
        print(f"--- agent\n{agent.output()}")
    assert code == 0, agent.output()  # a clean drain, nothing refused


def test_previous_agent_runs_jobs_on_the_current_server(tmp_path):
    # The agent is the release's own: its wheel holds the release's source.
    [installed] = (previous_runner_venv().parent / "lib").glob(
        "python*/site-packages/croniq_runner"
    )
    for module in (release_tree() / "runner" / "croniq_runner").glob("*.py"):
        assert (installed / module.name).read_bytes() == module.read_bytes(), module.name
    db = migrated_database(tmp_path)
    server = Server(db, tmp_path / "web.log", **SERVER_ENV)
    loop = start_loop(db, tmp_path / "loop.log", **SERVER_ENV)
    try:
        token, key = credentials(manage, db)
        ready(server)

        def previous_agent(*args: str) -> Process:
            return start_previous_agent(server.url, token, tmp_path / "agent.log", *args)

        run_the_jobs(Api(server.url, key), previous_agent)
    finally:
        for process in (server, loop):
            process.stop()
        drop_database(db)


def test_current_agent_runs_jobs_on_the_previous_server(tmp_path):
    db = previous_migrated_database(tmp_path)
    server = PreviousServer(db, tmp_path / "web.log", **SERVER_ENV)
    loop = start_previous_loop(db, tmp_path / "loop.log", **SERVER_ENV)
    try:
        token, key = credentials(previous_manage, db)
        ready(server)

        def current_agent(*args: str) -> Process:
            return start_agent(server.url, token, tmp_path / "agent.log", *args)

        run_the_jobs(Api(server.url, key), current_agent)
    finally:
        for process in (server, loop):
            process.stop()
        drop_database(db)
    # The server was the release's own code: its processes imported the
    # release's modules, never the current checkout's (installed in the
    # same virtualenv).
    assert {"asgi.py", "scheduler_loop.py"} <= {
        path.name.split(".")[0] + ".py" for path in compiled_sources(release_tree())
    }
    assert current_code_imported() == set()


def test_previous_agent_keeps_its_run_through_the_server_upgrade(tmp_path):
    """Servers first, as the README says: the previous release's web server
    and loop are stopped under a running job, the database migrated, the
    current server started on the same address; the run, which ends only
    once the new server is up, is reported to it, and the agent takes new
    work from it."""
    db = previous_migrated_database(tmp_path)
    # A lease longer than the upgrade on a loaded machine: the agent would
    # otherwise end its run itself (self-fencing) and the run be retried.
    env = {**SERVER_ENV, "CRONIQ_LEASE_TTL": 300}
    old = [
        PreviousServer(db, tmp_path / "web-previous.log", **env),
        start_previous_loop(db, tmp_path / "loop-previous.log", **env),
    ]
    new: list[Process] = []
    agent = None
    go = tmp_path / "go"
    try:
        token, key = credentials(previous_manage, db)
        api = Api(ready(old[0]).url, key)
        across = {
            "name": "across",
            "schedule": "0 0 1 1 *",
            "labels": [LABEL],
            "command": 'echo before; until [ -e "$GO" ]; do sleep 0.1; done; echo after',
            "env": {"GO": str(go)},
        }
        api.call("POST", "jobs", json=across)
        api.call("POST", "jobs", json={**across, "name": "next", "command": "echo next"})
        first = api.call("POST", "jobs/across/trigger")["execution_id"]
        agent = start_previous_agent(
            old[0].url, token, tmp_path / "agent.log", "--labels", LABEL, "--poll-wait", "5"
        )
        wait_for(
            lambda: "before" in api.call("GET", f"executions/{first}/log")["data"],
            timeout=60,
            message="the run to start",
        )

        for process in old:
            process.stop()
        manage(db, "migrate", "--no-input")
        new += [
            Server(db, tmp_path / "web.log", port=old[0].port, **env),
            start_loop(db, tmp_path / "loop.log", **env),
        ]
        ready(new[0])
        assert api.call("GET", f"executions/{first}")["state"] == "running"
        go.touch()

        wait_for(
            lambda: api.call("GET", f"executions/{first}")["state"] != "running",
            timeout=60,
            message="the run's end to reach the new server",
        )
        assert outcome(api, first) == ("succeeded", 0, "before\nafter\n")
        second = api.call("POST", "jobs/next/trigger")["execution_id"]
        wait_for(
            lambda: api.call("GET", f"executions/{second}")["state"] == "succeeded",
            timeout=60,
            message="the agent to run new work from the new server",
        )
        assert agent.alive(), agent.output()
    finally:
        go.touch()  # never leave the job waiting
        for process in [*old, *new]:
            process.stop()
        if agent is not None:
            code = agent.stop()
            print(f"--- agent\n{agent.output()}")
        drop_database(db)
    assert code == 0, agent.output()
