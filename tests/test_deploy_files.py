"""The compose files start real entry points and agree on their settings."""

import re
import shlex
import subprocess
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILES = ["docker-compose.yml", "docker-compose.sqlite.yml"]
DOCKERFILES = ["Dockerfile", "Dockerfile.runner"]
SHELL_STEPS = {"umask", "mv"}


def load(name):
    return yaml.safe_load((ROOT / name).read_text())


def console_scripts():
    """The programs the server's and the runner's (runner/) distributions install."""
    scripts = {}
    for project in (ROOT, ROOT / "runner"):
        pyproject = tomllib.loads((project / "pyproject.toml").read_text())
        scripts.update(pyproject["project"].get("scripts", {}))
    return scripts


def entry_points_of(command):
    """Each program a compose `command` runs, with its first argument."""
    if isinstance(command, list):
        command = shlex.join(command)
    if command.startswith("sh -c"):
        command = shlex.split(command)[2]
    for part in command.split("&&"):
        words = shlex.split(part)
        if words[0] == "exec":
            words = words[1:]
        if words[0] not in SHELL_STEPS:
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


def server_services(services):
    return {name: s for name, s in services.items() if s.get("image") == "croniq"}


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_the_server_services_share_the_database_and_runners_reach_web(name):
    services = load(name)["services"]
    urls = {s["environment"]["DATABASE_URL"] for s in server_services(services).values()}
    assert urls == {services["web"]["environment"]["DATABASE_URL"]}
    assert services["web"]["environment"]["SECRET_KEY"]
    assert services["runner"]["environment"]["CRONIQ_SERVER"] == "http://web:8000"
    assert "8000" in services["web"]["command"]
    assert services["web"]["command"].split("&&")[-1].split()[0] == "exec"  # gets the SIGTERM


def test_the_sqlite_deployment_is_one_serve_process_on_one_volume_and_no_database_service():
    services = load("docker-compose.sqlite.yml")["services"]
    assert "db" not in services
    assert set(server_services(services)) == {"web", "runner-token"}  # the token's is a setup
    commands = [args[1] for _, args in entry_points_of(services["web"]["command"])]
    assert commands == ["migrate", "serve"]
    assert services["web"]["command"].split("&&")[-1].split()[0] == "exec"  # gets the SIGTERM
    assert len(services["web"]["volumes"]) == 1
    path = services["web"]["environment"]["DATABASE_URL"].removeprefix("sqlite:///")
    volume_target = services["web"]["volumes"][0].split(":")[1]
    assert path.startswith(volume_target + "/")


def test_the_postgres_deployment_uses_the_db_service():
    services = load("docker-compose.yml")["services"]
    assert services["web"]["environment"]["DATABASE_URL"].startswith("postgres://")
    assert "@db:5432/" in services["web"]["environment"]["DATABASE_URL"]
    assert services["web"]["depends_on"]["db"]["condition"] == "service_healthy"


def test_the_procfile_starts_serve_and_a_runner():
    lines = dict(
        line.split(":", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line
    )
    assert set(lines) == {"web", "runner"}
    assert lines["web"].split()[:3] == ["python", "manage.py", "serve"]
    assert lines["runner"].split()[0] in console_scripts()


def test_the_demo_runner_runs_several_jobs_at_once():
    """One slot would queue the demo's jobs behind each other."""
    from croniq_runner.config import parse_args

    runner = (ROOT / "Procfile").read_text().split("runner:", 1)[1].splitlines()[0]
    argv = [word.replace("$CRONIQ_PORT", "8000") for word in runner.split()[1:]]
    config = parse_args(argv, environ={"CRONIQ_TOKEN": "demo-token"})
    assert config.capacity == 4


def copied_sources(dockerfile):
    """The build-context paths (or patterns) each COPY of `dockerfile` reads."""
    for line in (ROOT / dockerfile).read_text().splitlines():
        words = line.split()
        if words and words[0] == "COPY":
            yield from (w for w in words[1:-1] if not w.startswith("--"))


def tracked_files():
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return listing.stdout.decode().strip("\0").split("\0")


def dockerignored(path):
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line for line in lines if line and not line.startswith("#")]
    parts = Path(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(
        fnmatch(prefix, pattern.removeprefix("**/")) for pattern in patterns for prefix in prefixes
    )


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_every_copied_path_is_in_git_and_not_dockerignored(dockerfile):
    """A clean checkout builds: nothing the image copies exists only locally."""
    tracked = tracked_files()
    for source in copied_sources(dockerfile):
        copied = [p for p in tracked if fnmatch(p, source) or p.startswith(source + "/")]
        assert copied, f"{dockerfile} copies {source}, which git does not track"
        assert not any(dockerignored(p) for p in copied), f"{dockerfile}: {source} is dockerignored"


def test_the_compose_secret_key_stays_out_of_git_and_of_the_images():
    assert dockerignored(".env")
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT, check=False)
    assert ignored.returncode == 0


# -- the compose deployment -------------------------------------------------


def services_of(name):
    return load(name)["services"]


def required_variables(name):
    """Variables a compose file refuses to start without (`${NAME:?...}`)."""
    return set(re.findall(r"\$\{(\w+):\?", (ROOT / name).read_text()))


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_compose_needs_only_the_secret_key_kept_in_dotenv(name):
    """Every compose command checks these, the one creating the token too."""
    assert required_variables(name) == {"SECRET_KEY"}


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_long_running_services_restart_unless_stopped(name):
    for service_name, service in services_of(name).items():
        expected = "no" if "setup" in service.get("profiles", []) else "unless-stopped"
        assert service.get("restart") == expected, service_name


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_runners_read_the_token_from_a_file_that_runner_token_writes(name):
    services = services_of(name)
    runner, writer = services["runner"], services["runner-token"]
    assert "CRONIQ_TOKEN" not in runner["environment"]
    assert "--token" not in runner["command"].split()
    token_file = runner["environment"]["CRONIQ_TOKEN_FILE"]
    volume, target, mode = runner["volumes"][0].split(":")
    assert token_file.startswith(target + "/") and mode == "ro"
    assert f"{volume}:{target}" in writer["volumes"]
    assert f"> {token_file}.new" in writer["command"]
    assert f"mv {token_file}.new {token_file}" in writer["command"]
    assert writer["depends_on"]["web"]["condition"] == "service_healthy"
    assert writer["profiles"] == ["setup"]  # `up` leaves it out


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_runners_use_the_slim_image_and_the_server_services_one_image(name):
    services = services_of(name)
    assert services["runner"]["build"]["dockerfile"] == "Dockerfile.runner"
    server_images = {services[s]["image"] for s in ("web", "runner-token")}
    if "scheduler" in services:
        server_images.add(services["scheduler"]["image"])
    assert server_images == {"croniq"} and services["runner"]["image"] == "croniq-runner"


def test_the_server_image_copies_every_package_the_distribution_installs():
    """A new app left out of the Dockerfile breaks only the image build, late."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in include}
    copied = set(re.findall(r"^COPY (\w+) \./\1$", (ROOT / "Dockerfile").read_text(), re.M))
    assert packages <= copied, f"Dockerfile does not copy {sorted(packages - copied)}"


def test_make_run_installs_what_running_needs_not_the_dev_extras():
    commands = subprocess.run(
        ["make", "-n", "-B", "run"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    installs = [line for line in commands.splitlines() if "pip install" in line]
    assert any("-e ./runner" in line and "[demo]" in line for line in installs)
    assert not any("[dev]" in line for line in installs)
