"""Docker tests: the images built from a clean checkout, the compose flow.

They need a Docker engine and a `python:3.11-slim` base image; where no
image registry is reachable, `deploy/docker-base.sh` starts the engine and
builds a stand-in (`make test-docker` runs it first). Outside CI they skip,
saying why, when either is missing; with CI set they must run.
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = "python:3.11-slim"
SERVER_IMAGE = "croniq"  # the names docker-compose*.yml give the images
RUNNER_IMAGE = "croniq-runner"
FIGURES = ROOT / "test-artifacts" / "docker.json"

pytestmark = pytest.mark.docker


def in_ci():
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def docker(*args, check=True, timeout=120, **kwargs):
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=check, timeout=timeout, **kwargs
    )


def missing_engine():
    """Why the Docker tests cannot run here, or None."""
    if shutil.which("docker") is None:
        return "docker is not installed (deploy/docker-base.sh installs it)"
    if docker("info", check=False, timeout=30).returncode != 0:
        return "the Docker engine is not answering (deploy/docker-base.sh starts it)"
    if docker("image", "inspect", BASE_IMAGE, check=False, timeout=30).returncode != 0:
        return f"no {BASE_IMAGE} base image (deploy/docker-base.sh builds a stand-in)"
    return None


def require(reason):
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"the Docker tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def engine():
    require(missing_engine())


@pytest.fixture(scope="session")
def checkout(tmp_path_factory):
    """The files git tracks, as a clean checkout of this tree has them."""
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    target = tmp_path_factory.mktemp("checkout")
    for name in listing.stdout.decode().strip("\0").split("\0"):
        source = ROOT / name
        if source.is_file():  # deleted in the working tree: not in a checkout either
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


figures = {}


def record_figure(key, value):
    figures[key] = value


def build(checkout, tag, dockerfile):
    """`docker build --network host` of `dockerfile`; its time and size recorded."""
    started = time.monotonic()
    result = docker(
        "build", "--network", "host", "-t", tag, "-f", dockerfile, ".",
        cwd=checkout, check=False, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, (
        f"docker build {dockerfile}: {result.stderr}{result.stdout[-3000:]}"
    )
    size = int(docker("image", "inspect", tag, "--format", "{{.Size}}").stdout)
    record_figure(tag, {"build_seconds": round(time.monotonic() - started, 1), "bytes": size})
    return tag


@pytest.fixture(scope="session")
def server_image(engine, checkout):
    return build(checkout, SERVER_IMAGE, "Dockerfile")


@pytest.fixture(scope="session")
def runner_image(engine, checkout):
    return build(checkout, RUNNER_IMAGE, "Dockerfile.runner")


def pytest_terminal_summary(terminalreporter):
    """Build times, image sizes and the compose flow's time, for the CI log."""
    if figures:
        FIGURES.parent.mkdir(exist_ok=True)
        FIGURES.write_text(json.dumps(figures, indent=2) + "\n")
        terminalreporter.write_line(f"docker figures: {json.dumps(figures)}")
