"""The server and runner images, built from a clean checkout, really work."""

import re
import secrets
import time
import urllib.error
import urllib.request

import pytest

from tests.docker.conftest import docker

pytestmark = pytest.mark.docker

SECRET_KEY = secrets.token_urlsafe(50)
JOB = """
jobs:
  - name: from-the-runner-image
    schedule: "@every 5s"
    command: "echo hello from $CRONIQ_JOB in $(hostname)"
    labels: [linux]
  - name: reads-the-token
    schedule: "@every 5s"
    command: "echo running as $(id -un); cat /run/croniq/runner-token"
    labels: [linux]
"""


@pytest.fixture
def network():
    name = f"croniq-test-{secrets.token_hex(4)}"
    docker("network", "create", name)
    containers = []
    yield name, containers
    for container in containers:
        docker("rm", "-f", "-v", container, check=False)
    docker("network", "rm", name, check=False)


def start(network, image, *args, alias=None):
    name, containers = network
    options = ["--network", name] + (["--network-alias", alias] if alias else [])
    container = docker("run", "-d", *options, *args, image).stdout.strip()
    containers.append(container)
    return container


def get(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.headers, response.read()


def wait_until_healthy(base, container):
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            return get(f"{base}/healthz")
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.5)
    pytest.fail(f"web never answered /healthz:\n{logs(container)}")


def logs(container):
    result = docker("logs", container, check=False)
    return result.stdout + result.stderr


def manage_py(container, *args, stdin=None):
    return docker("exec", "-i", container, "python", "manage.py", *args, input=stdin).stdout


@pytest.fixture
def served(server_image, network):
    """A web container of the server image (migrate, then uvicorn as its CMD)
    and its URL on this machine."""
    container = start(
        network,
        server_image,
        "-e", f"SECRET_KEY={SECRET_KEY}",
        "-e", "DATABASE_URL=sqlite:////data/croniq.sqlite3",
        "-e", "ALLOWED_HOSTS=localhost,127.0.0.1,web",
        "-p", "127.0.0.1::8000",
        "-v", "/data",
        alias="web",
    )  # fmt: skip
    docker("exec", container, "python", "manage.py", "migrate", "--no-input")
    port = docker("port", container, "8000/tcp").stdout.split()[0].rsplit(":", 1)[1]
    base = f"http://127.0.0.1:{port}"
    wait_until_healthy(base, container)
    return container, base


def test_the_server_image_answers_healthz_and_the_admin_with_its_static_files(served):
    container, base = served
    status, _, _ = get(f"{base}/healthz")
    assert status == 200

    status, _, page = get(f"{base}/admin/login/")
    assert status == 200
    assert b"Croniq admin" in page
    assets = set(re.findall(r'(?:href|src)="(/static/[^"]+)"', page.decode()))
    assert any(asset.endswith(".css") for asset in assets)
    for asset in sorted(assets):
        status, headers, content = get(base + asset)
        assert status == 200 and content, asset
        assert int(headers["Content-Length"]) == len(content), asset

    output = logs(container)
    assert "StreamingHttpResponse" not in output
    assert "Traceback" not in output
    assert '/static/admin/css/base.css HTTP/1.1" 200' in output


def test_the_runner_image_holds_python_requests_and_the_agent_only(runner_image):
    installed = docker("run", "--rm", runner_image, "pip", "list", "--format=freeze").stdout
    names = {line.split("==")[0].lower() for line in installed.split()}
    requests_and_its_dependencies = {"requests", "certifi", "charset-normalizer", "idna", "urllib3"}
    assert (
        names - {"pip", "setuptools", "wheel"} == {"croniq-runner"} | requests_and_its_dependencies
    )

    code = "import croniq_runner.agent, sys; print(sorted(m for m in sys.modules if 'django' in m))"
    django_modules = docker("run", "--rm", runner_image, "python", "-c", code).stdout
    assert django_modules.strip() == "[]"
    assert docker("run", "--rm", runner_image, "croniq-runner", "--help").returncode == 0


def test_the_runner_image_runs_a_job_against_the_server_container(
    served, runner_image, network, tmp_path
):
    web, _ = served
    docker("exec", "-d", web, "python", "manage.py", "scheduler_loop")
    token = tmp_path / "runner-token"
    token.write_text(manage_py(web, "create_runner_token", "image-test"))
    token.chmod(0o600)  # the agent (root in its container) reads it, its jobs may not
    manage_py(web, "apply", "/dev/stdin", stdin=JOB)
    runner = start(
        network,
        runner_image,
        "-e", "CRONIQ_SERVER=http://web:8000",
        "-e", "CRONIQ_TOKEN_FILE=/run/croniq/runner-token",
        "-e", "CRONIQ_LABELS=linux",
        "-v", f"{token}:/run/croniq/runner-token:ro",
    )  # fmt: skip
    hostname = docker("inspect", runner, "--format", "{{.Config.Hostname}}").stdout.strip()

    query = (
        "from scheduler.models import LogChunk; "
        "print(*LogChunk.objects.filter(execution__state='{state}', execution__job__name='{job}')"
        ".values_list('data', flat=True), sep='')"
    )
    succeeded = query.format(state="succeeded", job="from-the-runner-image")
    failed = query.format(state="failed", job="reads-the-token")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ran = manage_py(web, "shell", "-c", succeeded)
        refused = manage_py(web, "shell", "-c", failed)
        if f"hello from from-the-runner-image in {hostname}" in ran and refused:
            # A job runs as croniq-job, never as the agent: it cannot read the token.
            assert "running as croniq-job" in refused
            assert "Permission denied" in refused
            assert token.read_text().strip() not in refused
            return
        time.sleep(2)
    pytest.fail(f"the jobs did not both run:\nrunner:\n{logs(runner)}\nweb:\n{logs(web)}")
