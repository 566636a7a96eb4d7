"""Croniq's previous release, run beside the current code: its server (web
and scheduler loop), its `manage.py` and its agent, for the tests that mix
versions (tests/e2e/test_upgrade_*.py).

Croniq has users with data and runners in the field: a release must migrate
a database the previous one made, and each side of the runner protocol must
work with the other side one release behind (docs/design.md: contracts only
grow).

The release's tree comes from this checkout's own history (`git archive`),
so a shallow clone fails here, naming the fix, rather than testing nothing.
Its server runs on the current virtualenv with PYTHONPATH at the old tree:
0.2.0 pinned the same packages (only Django's upper bound widened since, and
the lock keeps 5.2). Its agent runs from its own wheel, as on a runner host.
The tree and the agent's virtualenv are kept in .croniq/previous-release/,
named after the commit: built once, in the first test session that needs
them (once per CI run, from a fresh clone). Its processes write their
bytecode apart (pycache()), which also records every source file they
imported: the tests check that none was the current checkout's.
"""

import atexit
import fcntl
import functools
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.processes import (
    ROOT,
    Process,
    Server,
    agent_env,
    copy_database,
    create_database,
    drop_template,
    process_env,
)
from harness.runner_venv import checked, install, run

# 0.2.0. There are no tags: this is the commit that dated `## [0.2.0]` in
# CHANGELOG.md and set both packages' version to 0.2.0
# (`git log -S'## [0.2.0]' -- CHANGELOG.md`). It stays the previous release
# while the current one, 0.3.0, is what the checkout holds: the upgrade that
# users make is 0.2.0's database and agents meeting 0.3.0. Move it to 0.3.0's
# commit with the first change made after that release.
PREVIOUS_RELEASE = "6844e5140b6f1b85fb66663db1b8491396faae96"
PREVIOUS_VERSION = "0.2.0"

CACHE = ROOT / ".croniq" / "previous-release"


class ReleaseMissing(RuntimeError):
    """The checkout's history does not hold the previous release's commit."""


def git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, timeout=120)


def check_history(commit: str = PREVIOUS_RELEASE) -> None:
    """ReleaseMissing, saying what to do, unless the history holds `commit`."""
    if git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0:
        return
    shallow = git("rev-parse", "--is-shallow-repository").stdout.strip() == b"true"
    why = "this clone is shallow" if shallow else "this checkout's history does not hold it"
    raise ReleaseMissing(
        f"the previous release {PREVIOUS_VERSION} is commit {commit} (harness/previous_release.py)"
        f", and {why}: the upgrade tests run that release's code. Fetch the history with "
        f"`git fetch --unshallow` (or `git fetch origin {commit}`), then run the tests again."
    )


def locked_build(name: str, build: Callable[[Path], None]) -> Path:
    """CACHE/name, made by build(path) once: two suites started together
    (make test) wait for one build; a build cut short is started again."""
    target = CACHE / name
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = target / ".ready"
        if not ready.exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            build(target)
            ready.touch()
    return target


def extract(target: Path) -> None:
    check_history()
    archive = git("archive", "--format=tar", PREVIOUS_RELEASE)
    assert archive.returncode == 0, archive.stderr.decode(errors="replace")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(target / "tree", filter="data")


@functools.cache
def release_tree() -> Path:
    """The previous release's source tree. Once per session, forgets which
    of the current checkout's modules earlier sessions' processes imported
    (current_code_imported): a fixed mistake is not reported again."""
    tree = locked_build(PREVIOUS_RELEASE, extract) / "tree"
    mirror = pycache() / ROOT.relative_to(ROOT.anchor)
    for path in mirror.glob("[!.]*"):
        shutil.rmtree(path, ignore_errors=True)
    return tree


def build_runner(target: Path) -> None:
    source = release_tree() / "runner"
    wheels = target / "wheel"
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
    # From a copy: building leaves build/ and *.egg-info in the source.
    with_copy = target / "source"
    shutil.copytree(source, with_copy)
    checked(run([*pip, "--wheel-dir", str(wheels), str(with_copy)], target))
    shutil.rmtree(with_copy)
    [wheel] = wheels.glob("croniq_runner-*.whl")
    (target / "venv").mkdir()
    install(target / "venv", wheel)


@functools.cache
def previous_runner_venv() -> Path:
    """The bin directory of a virtualenv holding the previous release's
    runner wheel (harness/runner_venv.py builds the current one)."""
    python = hashlib.sha256(f"{sys.executable} {sys.version}".encode()).hexdigest()[:8]
    return locked_build(f"{PREVIOUS_RELEASE[:12]}-runner-{python}", build_runner) / "venv" / "bin"


def pycache() -> Path:
    """Where the previous release's processes write their bytecode: a tree
    mirroring the source paths of every module they imported."""
    return CACHE / PREVIOUS_RELEASE / "pycache"


def previous_paths() -> dict[str, object]:
    """The environment that runs the previous release's code: its tree
    first on the path, before the current checkout (installed editable in
    the virtualenv, found only for a module the old tree does not have).
    Bytecode is written (into pycache()) even where PYTHONDONTWRITEBYTECODE
    is set: what it shows is how the tests know what the processes ran,
    and it spares each later process compiling its modules again."""
    return {
        "PYTHONPATH": release_tree(),
        "PYTHONPYCACHEPREFIX": pycache(),
        "PYTHONDONTWRITEBYTECODE": "",
    }


def previous_env(database_url: str, **extra: object) -> dict[str, str]:
    """process_env() for the previous release's code."""
    return process_env(database_url, **previous_paths(), **extra)


def compiled_sources(under: Path) -> set[Path]:
    """The source files below `under` (relative to it) that a process of
    the previous release ever imported: their bytecode is in pycache()."""
    mirror = pycache() / under.relative_to(under.anchor)
    return {path.relative_to(mirror) for path in mirror.rglob("*.pyc")}


def current_code_imported() -> set[Path]:
    """Modules of the current checkout a process of the previous release
    ever imported: none, or the mixed-version tests test the current code
    with itself. (.venv and .croniq, the release's own tree, are not the
    checkout's code.)"""
    return {path for path in compiled_sources(ROOT) if not path.parts[0].startswith(".")}


def previous_manage(
    database_url: str, *args: str, check: bool = True, **extra_env: object
) -> subprocess.CompletedProcess[str]:
    """`manage.py ARGS` of the previous release."""
    tree = release_tree()
    return subprocess.run(
        [sys.executable, str(tree / "manage.py"), *args],
        cwd=tree,
        env=previous_env(database_url, **extra_env),
        capture_output=True,
        text=True,
        check=check,
        timeout=300,
    )


def previous_python(
    database_url: str, script: Path, *args: str, **extra_env: object
) -> subprocess.CompletedProcess[str]:
    """A Python script run inside the previous release's Django (the script
    calls django.setup())."""
    tree = release_tree()
    settings = {"DJANGO_SETTINGS_MODULE": "croniq_project.settings"}
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=tree,
        env=previous_env(database_url, **settings, **extra_env),
        capture_output=True,
        text=True,
        timeout=300,
    )


class PreviousServer(Server):
    """uvicorn serving the previous release's application."""

    def __init__(self, database_url: str, log_path: Path, **extra_env: object) -> None:
        super().__init__(database_url, log_path, **previous_paths(), **extra_env)

    def command(self) -> list[str]:
        # --app-dir: uvicorn puts it first on the path, where it would put
        # the working directory (the current checkout).
        return [*super().command(), "--app-dir", str(release_tree())]


def start_previous_loop(
    database_url: str, log_path: Path, *args: str, **extra_env: object
) -> Process:
    """The previous release's scheduler_loop."""
    return Process(
        [sys.executable, str(release_tree() / "manage.py"), "scheduler_loop", *args],
        previous_env(database_url, **extra_env),
        log_path,
    )


def start_previous_agent(
    server_url: str, token: str, log_path: Path, *args: str, **extra_env: object
) -> Process:
    """The previous release's croniq-runner, from its wheel."""
    extra_env.setdefault("XDG_STATE_HOME", Path(log_path).parent / "agent-state")
    env = agent_env(process_env("sqlite:////nonexistent", **extra_env))
    agent = previous_runner_venv() / "croniq-runner"
    return Process([str(agent), "--server", server_url, "--token", token, *args], env, log_path)


_template: dict[str, str] = {}


def previous_migrated_database(tmp_path: Path) -> str:
    """A new database the previous release's `migrate` made (its schema,
    no rows), on the backend the suite runs on. The first call migrates
    a template; every call copies it, as harness.processes does for the
    current schema."""
    if not _template:
        folder = Path(tempfile.mkdtemp(prefix="croniq-previous-template-"))
        url = create_database(folder)
        previous_manage(url, "migrate", "--no-input")
        _template["url"] = url
        atexit.register(drop_template, url, folder)
    return copy_database(
        _template["url"], Path(tmp_path) / "croniq-previous.sqlite3", "croniq_prev"
    )
