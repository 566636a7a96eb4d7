"""The lock files agree with pyproject.toml's ranges, and every install reads them.

`make lock` compiles them (uv pip compile, with hashes) for the images' and
CI's Python: 3.11 on Linux x86_64.
"""

import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
TARGET = {
    "python_version": "3.11",
    "python_full_version": "3.11.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}
# Each lock: the project it is compiled from and the extras it adds.
LOCKS = {
    "requirements/dev.txt": (".", ["demo", "dev"]),
    "requirements/run.txt": (".", ["demo"]),
    "requirements/server.txt": (".", []),
    "runner/requirements.txt": ("runner", []),
}
# Where each install reads its packages from.
INSTALLS = {
    "install-run": "requirements/run.txt",
    "install": "requirements/dev.txt",
    "Dockerfile": "requirements/server.txt",
    "Dockerfile.runner": "runner/requirements.txt",
}
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+)")
# Croniq's own packages a project requires: installed from this checkout
# with --no-deps, never from a lock (`make lock` leaves them out; their own
# requirements are locked).
FROM_THE_CHECKOUT = {"croniq-runner"}


def read_lock(lock):
    """{name: (version, hashes, via)}: via names what required the package."""
    entries, name = {}, None
    for line in (ROOT / lock).read_text().splitlines():
        if match := PIN.match(line):
            name = canonicalize_name(match[1])
            entries[name] = (Version(match[2]), [], set())
        elif "--hash=sha256:" in line:
            entries[name][1].append(line.split("--hash=sha256:")[1].rstrip(" \\"))
        elif line.strip().startswith("#") and name:
            via = line.strip().lstrip("#").strip().removeprefix("via").strip()
            if via and not via.startswith("-c "):
                entries[name][2].add(canonicalize_name(via.split(" (")[0]))
    return entries


def project_of(lock):
    directory, extras = LOCKS[lock]
    return tomllib.loads((ROOT / directory / "pyproject.toml").read_text())["project"], extras


def direct_requirements(lock):
    """The project's requirements (its extras' too) that hold on the target."""
    project, extras = project_of(lock)
    listed = [(r, "") for r in project["dependencies"]]
    listed += [(r, e) for e in extras for r in project["optional-dependencies"][e]]
    requirements = [(Requirement(r), extra) for r, extra in listed]
    return [
        r
        for r, extra in requirements
        if (not r.marker or r.marker.evaluate(TARGET | {"extra": extra}))
        and canonicalize_name(r.name) not in FROM_THE_CHECKOUT
    ]


@pytest.mark.parametrize("lock", LOCKS)
def test_every_direct_dependency_is_pinned_within_its_range(lock):
    pinned = read_lock(lock)
    for requirement in direct_requirements(lock):
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{lock} lacks {requirement}: run `make lock`"
        version = pinned[name][0]
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{lock} pins {name}=={version}, outside {requirement}: run `make lock`"
        )


def test_the_platform_markers_resolve_for_linux():
    """uvloop and inotify_simple are only in the lock where the markers hold."""
    for lock in ("requirements/server.txt", "requirements/dev.txt"):
        assert {"uvloop", "inotify-simple"} <= set(read_lock(lock))


@pytest.mark.parametrize("lock", LOCKS)
def test_every_locked_package_is_required_by_the_project_or_a_locked_package(lock):
    """Nothing is left over from a dependency since removed."""
    project, _ = project_of(lock)
    entries = read_lock(lock)
    needed = {canonicalize_name(project["name"])}
    while grown := {n for n, (_, _, via) in entries.items() if via & needed} - needed:
        needed |= grown
    assert set(entries) <= needed, f"{lock}: nothing requires {sorted(set(entries) - needed)}"


def test_the_runner_lock_holds_requests_and_its_dependencies_only():
    """The rest reach it through requests (the test above): no Django in the image."""
    entries = read_lock("runner/requirements.txt")
    direct = {name for name, (_, _, via) in entries.items() if "croniq-runner" in via}
    assert direct == {"requests"}
    assert "django" not in entries


@pytest.mark.parametrize("lock", LOCKS)
def test_every_pin_carries_its_hashes(lock):
    """pip checks hashes only when every requirement of the file has them."""
    for name, (version, hashes, _) in read_lock(lock).items():
        assert hashes and all(len(h) == 64 for h in hashes), f"{lock}: {name}=={version}"


@pytest.mark.parametrize("lock", [lock for lock in LOCKS if lock != "requirements/dev.txt"])
def test_the_images_and_make_run_get_the_versions_the_suite_tests(lock):
    """The other locks are compiled within the development one."""
    tested = {name: entry[0] for name, entry in read_lock("requirements/dev.txt").items()}
    for name, (version, _, _) in read_lock(lock).items():
        assert tested.get(name) == version, f"{lock}: {name}=={version}, dev.txt {tested.get(name)}"


def pip_installs_of_make(target):
    commands = subprocess.run(
        ["make", "-n", "-B", target, "VENV=/nonexistent/venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installs = [shlex.split(line) for line in commands.splitlines() if "pip install" in line]
    return [words for words in installs if "--upgrade" not in words]  # pip itself


def pip_installs_of_dockerfile(name):
    text = (ROOT / name).read_text().replace("\\\n", " ")
    runs = [line.removeprefix("RUN ") for line in text.splitlines() if line.startswith("RUN ")]
    commands = [shlex.split(part) for run in runs for part in run.split("&&")]
    return [words for words in commands if words[:2] == ["pip", "install"]]


def locks_read(installs, where):
    """The lock files `installs` read; every other install brings no packages."""
    read = set()
    for words in installs:
        if "-r" in words:
            read.add(words[words.index("-r") + 1])
        else:
            assert "--no-deps" in words, f"{where}: {shlex.join(words)} resolves ranges"
    return read


@pytest.mark.parametrize("target", ["install-run", "install"])
def test_make_installs_from_the_locks(target):
    read = locks_read(pip_installs_of_make(target), f"make {target}")
    assert INSTALLS[target] in read
    assert target == "install" or "requirements/dev.txt" not in read


def copied_to(dockerfile, source):
    """Where `dockerfile` copies `source`, relative to its WORKDIR."""
    text = (ROOT / dockerfile).read_text()
    copy = re.search(rf"^COPY {re.escape(source)} (\S+)$", text, re.M)
    assert copy, f"{dockerfile} does not copy {source}"
    destination = copy[1].removeprefix("./")
    return destination + Path(source).name if destination.endswith("/") else destination


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "Dockerfile.runner"])
def test_the_images_install_from_their_lock(dockerfile):
    read = locks_read(pip_installs_of_dockerfile(dockerfile), dockerfile)
    assert read == {copied_to(dockerfile, INSTALLS[dockerfile])}


def test_the_server_requires_its_own_release_of_the_runner_package():
    """import_crontab reads crontabs with croniq_runner.crontab (docs/design.md §13)."""
    project, _ = project_of("requirements/server.txt")
    [runner] = [Requirement(r) for r in project["dependencies"] if r.startswith("croniq-runner")]
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert str(runner.specifier) == f"=={version}"


@pytest.mark.parametrize("lock", [lock for lock in LOCKS if LOCKS[lock][0] == "."])
def test_the_server_locks_hold_the_runner_packages_requirements_but_not_the_package(lock):
    entries = read_lock(lock)
    assert not FROM_THE_CHECKOUT & set(entries)
    assert "croniq-runner" in entries["requests"][2], f"{lock}: run `make lock`"


@pytest.mark.parametrize("target", ["install-run", "install"])
def test_make_installs_the_runner_package_from_the_checkout(target):
    installs = pip_installs_of_make(target)
    assert any("./runner" in words and "--no-deps" in words for words in installs)


def test_the_server_image_installs_the_runner_package_from_the_checkout():
    assert copied_to("Dockerfile", "runner") == "runner"
    installs = pip_installs_of_dockerfile("Dockerfile")
    assert any("./runner" in words and "--no-deps" in words for words in installs)


def test_the_installer_is_pinned_as_the_development_lock_pins_it():
    """`make install` installs uv from requirements/uv.txt with pip, hashes
    required, then every lock with it; `make lock` writes that file too."""
    [(name, (version, hashes, _))] = read_lock("requirements/uv.txt").items()
    assert name == "uv" and hashes
    assert read_lock("requirements/dev.txt")["uv"][0] == version
    first, *later = pip_installs_of_make("install")
    assert first[:4] == ["/nonexistent/venv/bin/python", "-m", "pip", "install"]
    assert "--require-hashes" in first and locks_read([first], "make install") == {
        "requirements/uv.txt"
    }
    assert later and all(
        words[:3] == ["/nonexistent/venv/bin/uv", "pip", "install"] for words in later
    )
