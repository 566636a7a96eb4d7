"""The README's deploy commands, run as written, on docker-compose.sqlite.yml.

Debian's `docker-compose` stands in for `docker compose`: the commands the
README uses mean the same to both.
"""

import contextlib
import os
import re
import secrets
import shutil
import subprocess
import time
from datetime import datetime

import pytest

from harness.processes import free_port
from tests.docker.conftest import ROOT, record_figure, require

pytestmark = pytest.mark.docker

JOB = """
jobs:
  - name: compose-every-5s
    schedule: "@every 5s"
    command: "echo hello from $CRONIQ_JOB"
    labels: [linux]
"""
# Django's shell also prints how many objects it imported: the instants are
# the words with a "T" (ISO 8601).
SUCCEEDED = (
    "from scheduler.models import Execution; "
    "runs = Execution.objects.filter(job__name='compose-every-5s', state='succeeded'); "
    "print(*(r.scheduled_for.isoformat() for r in runs.order_by('scheduled_for')))"
)


def readme_deploy_commands():
    """The shell block of README.md's "Running in production", as written."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Running in production", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


def with_docker_compose(commands):
    return commands.replace("docker compose ", "docker-compose ")


@contextlib.contextmanager
def compose_project(checkout, compose_file, name):
    """Runs docker-compose in the clean checkout, on `compose_file`, as a
    project of its own; takes everything down with its volumes afterwards."""
    if shutil.which("docker-compose") is None:
        require("docker-compose is not installed (apt-get install docker-compose)")
    env = {
        **os.environ,
        "COMPOSE_FILE": compose_file,
        "COMPOSE_PROJECT_NAME": f"{name}{secrets.token_hex(3)}",
        "CRONIQ_PORT": str(free_port()),
    }
    env.pop("SECRET_KEY", None)  # the README's commands keep it in .env

    def run(*args, check=True, timeout=300, **kwargs):
        return subprocess.run(
            args, cwd=checkout, env=env, capture_output=True, text=True,
            check=check, timeout=timeout, **kwargs,
        )  # fmt: skip

    (checkout / ".env").unlink(missing_ok=True)
    try:
        yield run
    finally:
        print(run("docker-compose", "logs", "--no-color", check=False).stdout[-6000:])
        run("docker-compose", "--profile", "setup", "down", "-v", "--remove-orphans", check=False)
        (checkout / ".env").unlink(missing_ok=True)


@pytest.fixture
def compose(engine, server_image, runner_image, checkout):
    with compose_project(checkout, "docker-compose.sqlite.yml", "croniqtest") as run:
        yield run


def test_the_compose_files_are_valid(compose):
    for name in ("docker-compose.yml", "docker-compose.sqlite.yml"):
        result = compose("docker-compose", "-f", name, "config", "-q", check=False)
        assert "SECRET_KEY" in result.stderr and result.returncode != 0  # no .env yet
        result = compose("env", "SECRET_KEY=x", "docker-compose", "-f", name, "config", "-q")
        assert result.returncode == 0, result.stderr


def test_the_readme_deploy_flow_runs_a_job_every_five_seconds(compose):
    started = time.monotonic()
    deploy = compose("bash", "-euc", with_docker_compose(readme_deploy_commands()), check=False)
    assert deploy.returncode == 0, f"README deploy failed:\n{deploy.stdout}\n{deploy.stderr}"
    record_figure("compose_deploy_seconds", round(time.monotonic() - started, 1))

    running = compose("docker-compose", "ps", "--services", "--filter", "status=running")
    assert set(running.stdout.split()) == {"web", "runner"}  # web is `serve`: web and loop
    runner = compose("docker-compose", "ps", "-q", "runner").stdout.strip()
    environment = compose("docker", "inspect", runner, "--format", "{{json .Config.Env}}").stdout
    assert "CRONIQ_TOKEN_FILE=/run/croniq/runner-token" in environment
    assert "CRONIQ_TOKEN=" not in environment
    policy = compose("docker", "inspect", runner, "--format", "{{.HostConfig.RestartPolicy.Name}}")
    assert policy.stdout.strip() == "unless-stopped"

    exec_web = ("docker-compose", "exec", "-T", "web", "python", "manage.py")
    compose(*exec_web, "apply", "/dev/stdin", input=JOB)
    deadline = time.monotonic() + 90
    instants = []
    while time.monotonic() < deadline and len(instants) < 2:
        time.sleep(3)
        output = compose(*exec_web, "shell", "-c", SUCCEEDED).stdout
        instants = [datetime.fromisoformat(word) for word in output.split() if "T" in word]
    assert len(instants) >= 2, "fewer than two runs succeeded in 90 s"
    assert (instants[1] - instants[0]).total_seconds() == 5
    record_figure("compose_flow_seconds", round(time.monotonic() - started, 1))

    # Run again, runner-token refuses (the name is taken) and keeps the token.
    token = ("docker-compose", "exec", "-T", "runner", "cat", "/run/croniq/runner-token")
    before = compose(*token).stdout
    again = compose("docker-compose", "run", "--rm", "runner-token", check=False)
    assert again.returncode != 0 and "exists already" in again.stderr
    assert compose(*token).stdout == before != ""
