"""The compose files start real entry points and agree on their settings."""

import shlex
import tomllib
from pathlib import Path

import pytest
import yaml
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILES = ["docker-compose.yml", "docker-compose.sqlite.yml"]


def load(name):
    return yaml.safe_load((ROOT / name).read_text())


def console_scripts():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def entry_points_of(command):
    """Each program a compose `command` runs, with its first argument."""
    if isinstance(command, list):
        command = shlex.join(command)
    if command.startswith("sh -c"):
        command = shlex.split(command)[2]
    for part in command.split("&&"):
        words = shlex.split(part)
        yield words[0], words[1:]


def assert_real_entry_point(program, args):
    if program == "python":
        assert args[0] == "manage.py"
        assert args[1] in get_commands(), f"manage.py has no {args[1]!r} command"
    elif program == "uvicorn":
        module, attribute = args[0].split(":")
        imported = __import__(module, fromlist=[attribute])
        assert callable(getattr(imported, attribute))
    else:
        assert program in console_scripts(), f"{program!r} is not a console script"


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_every_service_command_names_a_real_entry_point(name):
    for service_name, service in load(name)["services"].items():
        if "command" not in service:
            assert service_name == "db"
            continue
        for program, args in entry_points_of(service["command"]):
            assert_real_entry_point(program, args)


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_web_and_scheduler_share_the_database_and_runners_reach_web(name):
    services = load(name)["services"]
    assert (
        services["web"]["environment"]["DATABASE_URL"]
        == (services["scheduler"]["environment"]["DATABASE_URL"])
    )
    assert services["web"]["environment"]["SECRET_KEY"]
    assert services["runner"]["environment"]["CRONIQ_SERVER"] == "http://web:8000"
    assert "8000" in services["web"]["command"]


def test_the_sqlite_deployment_shares_one_volume_and_has_no_database_service():
    services = load("docker-compose.sqlite.yml")["services"]
    assert "db" not in services
    assert services["web"]["volumes"] == services["scheduler"]["volumes"]
    path = services["web"]["environment"]["DATABASE_URL"].removeprefix("sqlite:///")
    volume_target = services["web"]["volumes"][0].split(":")[1]
    assert path.startswith(volume_target + "/")


def test_the_postgres_deployment_uses_the_db_service():
    services = load("docker-compose.yml")["services"]
    assert services["web"]["environment"]["DATABASE_URL"].startswith("postgres://")
    assert "@db:5432/" in services["web"]["environment"]["DATABASE_URL"]
    assert services["web"]["depends_on"]["db"]["condition"] == "service_healthy"


def test_the_procfile_starts_web_loop_and_runner():
    lines = dict(
        line.split(":", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line
    )
    assert set(lines) == {"web", "loop", "runner"}
    assert "croniq_project.asgi:application" in lines["web"]
    assert "scheduler_loop" in lines["loop"]
    assert lines["runner"].split()[0] in console_scripts()
