"""The README's deploy commands on docker-compose.yml: PostgreSQL, web,
scheduler loop and a runner, each in its own container.

Where no image registry answers, `deploy/docker-base.sh` provides a
`postgres:16` stand-in (Debian's PostgreSQL behind the official image's
environment contract), so the compose file runs as written.
"""

import time
from datetime import datetime

import pytest

from tests.docker.conftest import docker, record_figure, require
from tests.docker.test_compose import (
    JOB,
    SUCCEEDED,
    compose_project,
    readme_deploy_commands,
    with_docker_compose,
)

pytestmark = pytest.mark.docker


@pytest.fixture
def compose_postgres(engine, server_image, runner_image, checkout):
    if docker("image", "inspect", "postgres:16", check=False, timeout=30).returncode != 0:
        require("no postgres:16 image (deploy/docker-base.sh builds a stand-in)")
    with compose_project(checkout, "docker-compose.yml", "croniqpg") as run:
        yield run


def test_the_readme_deploy_flow_runs_on_postgresql(compose_postgres):
    compose = compose_postgres
    started = time.monotonic()
    deploy = compose("bash", "-euc", with_docker_compose(readme_deploy_commands()), check=False)
    assert deploy.returncode == 0, f"README deploy failed:\n{deploy.stdout}\n{deploy.stderr}"

    running = compose("docker-compose", "ps", "--services", "--filter", "status=running")
    assert {"db", "web", "scheduler", "runner"} <= set(running.stdout.split())

    exec_web = ("docker-compose", "exec", "-T", "web", "python", "manage.py")
    vendor = compose(
        *exec_web, "shell", "-c", "from django.db import connection; print(connection.vendor)"
    )
    assert vendor.stdout.split()[-1] == "postgresql"
    compose(*exec_web, "apply", "/dev/stdin", input=JOB)
    deadline = time.monotonic() + 90
    instants = []
    while time.monotonic() < deadline and len(instants) < 2:
        time.sleep(3)
        output = compose(*exec_web, "shell", "-c", SUCCEEDED).stdout
        instants = [datetime.fromisoformat(word) for word in output.split() if "T" in word]
    assert len(instants) >= 2, "fewer than two runs succeeded in 90 s"
    assert (instants[1] - instants[0]).total_seconds() == 5
    record_figure("compose_postgres_flow_seconds", round(time.monotonic() - started, 1))

    # The database restarts under the running services; scheduling resumes.
    compose("docker-compose", "restart", "db")
    seen = len(instants)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(instants) < seen + 2:
        time.sleep(3)
        output = compose(*exec_web, "shell", "-c", SUCCEEDED, check=False).stdout
        instants = [
            datetime.fromisoformat(word) for word in output.split() if "T" in word
        ] or instants
    assert len(instants) >= seen + 2, "scheduling did not resume after the database restarted"
