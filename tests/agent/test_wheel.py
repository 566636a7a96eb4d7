"""The runner's own distribution: what `pip wheel --no-deps ./runner` builds.

tests/e2e/test_agent.py installs this wheel in a virtualenv with only
requests and runs a real job from it; every agent of the end-to-end suite
runs from there (harness/runner_venv.py).
"""

import email
import tomllib
import zipfile

import pytest

import croniq_runner
from croniq_runner import client, config
from harness.runner_venv import ROOT, RUNNER, build_wheel, run, runner_venv


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return zipfile.ZipFile(build_wheel(tmp_path_factory.mktemp("wheel")))


def dist_info(wheel, name):
    [path] = [n for n in wheel.namelist() if n.endswith(f".dist-info/{name}")]
    return wheel.read(path).decode()


def pyproject(path):
    return tomllib.loads((path / "pyproject.toml").read_text())


def test_the_wheel_holds_the_agent_package_and_nothing_else(wheel):
    modules = {n for n in wheel.namelist() if not n.split("/")[0].endswith(".dist-info")}
    source = {
        str(path.relative_to(RUNNER))
        for path in (RUNNER / "croniq_runner").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert modules == source
    assert "croniq_runner/supervisor.py" in modules  # started as a script by path


def test_the_wheel_depends_on_requests_only_and_installs_croniq_runner_and_croniq(wheel):
    metadata = email.message_from_string(dist_info(wheel, "METADATA"))
    assert metadata["Name"] == "croniq-runner"
    # Beside requests only the extra `mcp` (`croniq mcp`), which the agent never imports.
    requires = metadata.get_all("Requires-Dist")
    assert [r for r in requires if "extra ==" not in r] == ["requests>=2.31"]
    assert metadata.get_all("Provides-Extra") == ["mcp"]
    assert [r for r in requires if "extra ==" in r] == ['mcp<3,>=2; extra == "mcp"']
    entry_points = dist_info(wheel, "entry_points.txt")
    assert "croniq-runner = croniq_runner.agent:main" in entry_points.splitlines()
    assert "croniq = croniq_runner.cli:run" in entry_points.splitlines()


def test_runner_and_server_carry_one_version(wheel):
    metadata = email.message_from_string(dist_info(wheel, "METADATA"))
    assert metadata["Version"] == croniq_runner.__version__
    assert pyproject(ROOT)["project"]["version"] == croniq_runner.__version__
    assert config.VERSION == client.VERSION == croniq_runner.__version__


def test_the_server_distribution_no_longer_ships_the_agent():
    server = pyproject(ROOT)
    assert "croniq-runner" not in server["project"].get("scripts", {})
    assert not list((ROOT / "runners").glob("agent*.py"))


def test_the_installed_agent_tells_its_version():
    shown = run([runner_venv() / "croniq-runner", "--version"], ROOT)
    assert shown.stdout.strip() == f"croniq-runner {croniq_runner.__version__}"
    shown = run([runner_venv() / "croniq", "--version"], ROOT)
    assert shown.stdout.strip() == f"croniq {croniq_runner.__version__}"
