"""Container jobs (docs/design.md §15) through real processes: a server, an
agent from the runner's wheel with `--engine docker`, and this machine's
Docker engine running the stand-in base image (deploy/docker-base.sh), never
pulled. The container's output is the run's log and its exit code the
run's, its env reaches it (a secret masked in the log), and it is gone after
the run, after a cancel, a timeout, the agent's SIGKILL (its supervisor
stops it) and the death of the agent with its supervisors (the next start
removes it). One server and agent serve the module; a test that kills the
agent starts it again."""

import os
import secrets
import signal
from pathlib import Path

import pytest
import requests
from cryptography.fernet import Fernet

from harness.processes import Server, manage, migrated_database, start_agent, wait_for
from tests.agent.world import ready
from tests.docker.conftest import BASE_IMAGE, docker

pytestmark = pytest.mark.docker

KEYS = Fernet.generate_key().decode()
SECRET = "pw-" + secrets.token_hex(8)
# The smallest stand-in image with a shell, never pulled (no registry here).
IMAGE = BASE_IMAGE
MISSING_IMAGE = "croniq-test-no-such-image:1"
# A container waiting to be ended; PID 1 ignores SIGTERM unless it traps it.
WAITS = "echo started; while :; do sleep 0.2; done"


class Croniq:
    """The module's server, API and agent (started again when a test killed it)."""

    def __init__(self, folder: Path, database: str) -> None:
        self.folder = folder
        self.database = database
        key = manage(database, "create_api_key", "ops", "--scopes", "admin").stdout.strip()
        self.token = manage(database, "create_runner_token", "containers").stdout.strip()
        self.server = Server(
            database,
            folder / "web.log",
            CRONIQ_SECRETS_KEYS=KEYS,
            CRONIQ_HEARTBEAT_INTERVAL=1,
            CRONIQ_LEASE_TTL=6,
            # A run its killed agent held is not tried again by the next one.
            CRONIQ_LOST_RETRIES=0,
        )
        self.api = requests.Session()
        self.api.headers["Authorization"] = f"Bearer {key}"
        self.url = ready(self.server).url + "/api/v1/"
        self.agent = self.start_agent()

    def start_agent(self):
        return start_agent(
            self.server.url, self.token, self.folder / "agent.log",
            "--name", "docker-agent", "--engine", "docker", "--kill-grace", "1",
            "--poll-wait", "5", "--capacity", "2", "--drain-timeout", "5",
        )  # fmt: skip

    def agent_alive(self):
        if not self.agent.alive():
            self.agent = self.start_agent()
        return self.agent

    def post(self, path, body=None):
        answer = self.api.post(self.url + path, json=body, timeout=30)
        assert answer.status_code in (200, 201, 202), answer.text
        return answer.json()

    def get(self, path):
        answer = self.api.get(self.url + path, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def run(self, name, container, **fields):
        """A new container job `name`, triggered: its execution id."""
        job = {"name": name, "schedule": "0 0 1 1 *", "kind": "container"}
        self.post("jobs", {**job, "labels": ["container"], "container": container, **fields})
        return self.post(f"jobs/{name}/trigger")["execution_id"]

    def execution(self, execution_id):
        return self.get(f"executions/{execution_id}")

    def ended(self, execution_id, timeout=90):
        def done():
            answer = self.execution(execution_id)
            return answer if answer["state"] not in ("pending", "running") else None

        return wait_for(done, timeout=timeout, interval=0.2, message=f"run {execution_id} to end")

    def log(self, execution_id):
        return self.get(f"executions/{execution_id}/log")["data"]

    def output(self):
        return f"--- agent\n{self.agent.output()}\n--- web\n{self.server.output()[-5000:]}"


def containers_of(execution_id):
    """The names of the containers, running or not, of a run (croniq-ID-...)."""
    listed = docker(
        "ps", "-a", "--filter", f"name=croniq-{execution_id}-", "--format", "{{.Names}}"
    )
    return [name for name in listed.stdout.split() if name.startswith(f"croniq-{execution_id}-")]


def running_container(execution_id, timeout=60):
    def found():
        names = containers_of(execution_id)
        return names[0] if names else None

    return wait_for(found, timeout=timeout, interval=0.2, message="the run's container")


def gone(execution_id, timeout=60):
    wait_for(lambda: not containers_of(execution_id), timeout=timeout, interval=0.2,
             message=f"the containers of run {execution_id} to be gone")  # fmt: skip
    return True


def started(croniq, execution_id):
    """Wait until the container has written its first line to the run's log."""
    wait_for(lambda: "started" in croniq.log(execution_id), timeout=60, interval=0.2,
             message="the container's first output")  # fmt: skip


@pytest.fixture(scope="module")
def croniq(engine, tmp_path_factory):
    folder = tmp_path_factory.mktemp("container-jobs")
    world = Croniq(folder, migrated_database(folder))
    try:
        world.post("secrets", {"name": "db-password", "value": SECRET})
        yield world
    finally:
        world.agent.stop()
        world.server.stop()
        print(world.output())
        # Whatever a failed test left: only this module's runs (croniq.job labels).
        listed = docker("ps", "-aq", "--filter", "label=croniq.job", check=False).stdout.split()
        for container in listed:
            labels = docker("inspect", "--format", "{{index .Config.Labels \"croniq.job\"}}",
                            container, check=False).stdout.strip()  # fmt: skip
            if labels.startswith("ct-"):
                docker("rm", "-f", container, check=False)


def test_the_runner_carries_the_container_label_by_itself(croniq):
    def registered():
        items = croniq.get("runners")["items"]
        return next((r for r in items if r["name"] == "docker-agent"), None)

    runner = wait_for(registered, timeout=60, interval=0.2, message="the agent to register")
    assert "container" in runner["labels"]


def test_the_output_is_the_log_the_exit_code_the_runs_the_env_reaches_it_and_it_is_removed(
    croniq,
):
    script = 'echo "hello $GREETING from $CRONIQ_JOB, run $CRONIQ_EXECUTION_ID"; '
    script += 'echo "pw=$DB_PASSWORD" >&2; exit 3'
    env = {"GREETING": "world", "DB_PASSWORD": "${secret:db-password}"}
    container = {"image": IMAGE, "pull": "never", "args": ["sh", "-c", script], "env": env}
    run = croniq.run("ct-output", container, timeout=120)
    done = croniq.ended(run)
    assert (done["state"], done["exit_code"]) == ("failed", 3), croniq.output()
    # The engine carries stdout and stderr apart: their lines interleave in any order.
    lines = croniq.log(run).splitlines(keepends=True)
    assert sorted(lines) == sorted([f"hello world from ct-output, run {run}\n", "pw=***\n"])
    assert containers_of(run) == []
    assert SECRET not in croniq.output()


def test_a_missing_image_with_pull_never_fails_the_run_saying_so(croniq):
    run = croniq.run("ct-missing", {"image": MISSING_IMAGE, "pull": "never"})
    done = croniq.ended(run)
    assert (done["state"], done["exit_code"]) == ("failed", 125), croniq.output()
    assert done["error"].startswith("docker could not run the container (exit 125): ")
    assert f"No such image: {MISSING_IMAGE}" in done["error"]
    assert containers_of(run) == []


def test_a_cancel_ends_the_container_with_sigterm_and_removes_it(croniq):
    croniq.agent_alive()
    script = f"trap 'echo got TERM; exit 143' TERM; {WAITS}"
    run = croniq.run("ct-cancel", {"image": IMAGE, "pull": "never", "args": ["sh", "-c", script]})
    started(croniq, run)
    assert running_container(run)
    croniq.post(f"executions/{run}/cancel")
    done = croniq.ended(run)
    assert done["state"] == "cancelled", croniq.output()
    assert croniq.log(run) == "started\ngot TERM\n"
    assert gone(run)


def test_a_timeout_kills_the_container_after_the_grace_and_removes_it(croniq):
    croniq.agent_alive()
    # PID 1 without a trap ignores SIGTERM: SIGKILL ends it after --kill-grace.
    container = {"image": IMAGE, "pull": "missing", "args": ["sh", "-c", WAITS]}
    run = croniq.run("ct-timeout", container, timeout=3)
    done = croniq.ended(run)
    assert done["state"] == "timed_out", croniq.output()
    assert done["error"].startswith("timed out after 3s")
    assert gone(run)


def test_when_the_agent_is_killed_its_container_ends_too(croniq):
    agent = croniq.agent_alive()
    run = croniq.run("ct-agent-killed", waiting())
    started(croniq, run)
    assert running_container(run)
    agent.kill()  # SIGKILL: the supervisor sees its pipe close
    assert gone(run)


def test_when_the_agent_and_its_supervisors_die_the_next_start_removes_the_container(croniq):
    agent = croniq.agent_alive()
    run = croniq.run("ct-all-killed", waiting())
    started(croniq, run)
    name = running_container(run)
    supervisor = next(pid for pid in children(agent.popen.pid) if "supervisor.py" in cmdline(pid))
    # Frozen first, so that neither sees the other die and acts on it.
    os.kill(agent.popen.pid, signal.SIGSTOP)
    os.killpg(supervisor, signal.SIGSTOP)
    os.killpg(supervisor, signal.SIGKILL)  # the supervisor and the engine's command
    agent.kill()
    wait_for(lambda: not cmdline(supervisor), message="the supervisor to be gone")
    # Nothing is left to end it: it keeps running.
    assert containers_of(run) == [name]
    assert "Up " in docker("ps", "--filter", f"name={name}", "--format", "{{.Status}}").stdout
    croniq.agent_alive()  # the same name and state directory
    assert gone(run)
    assert f"removed container {name} of execution {run}" in croniq.agent.output()


def waiting():
    return {"image": IMAGE, "pull": "never", "args": ["sh", "-c", WAITS]}


def children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
