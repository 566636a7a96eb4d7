"""croniq-runner installed the way an operator installs it on a runner host:
the wheel that `pip wheel --no-deps ./runner` builds, in a virtualenv that
holds only that wheel and requests (with requests' own dependencies): no
Django, no server code, not even pip.

The end-to-end and chaos suites run every agent from this virtualenv. pip
fetches setuptools to build the wheel and requests to install it, so the
virtualenv is kept in .croniq/runner-venv/, named after a hash of runner/:
a rerun finds it ready, a change to runner/ builds a new one, and a fresh
checkout (CI) builds it once per test session.
"""

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "runner"
CACHE = ROOT / ".croniq" / "runner-venv"
# What building or installing leaves in runner/: not part of the package.
LEFTOVERS = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")


def bare_env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DJANGO", "CRONIQ"))}


def run(args, cwd, **kwargs):
    return subprocess.run(
        args, cwd=cwd, env=bare_env(), capture_output=True, text=True, timeout=300, **kwargs
    )


def checked(result):
    assert result.returncode == 0, f"{result.args}:\n{result.stdout}\n{result.stderr}"
    return result


def source_files():
    ignored = {"__pycache__", "build", "dist"}
    for path in sorted(RUNNER.rglob("*")):
        parts = path.relative_to(RUNNER).parts
        if (
            path.is_file()
            and not ignored & set(parts)
            and not any(p.endswith((".egg-info", ".pyc")) for p in parts)
        ):
            yield path


def source_hash():
    digest = hashlib.sha256(f"{sys.executable} {sys.version}\0".encode())
    for path in source_files():
        digest.update(str(path.relative_to(RUNNER)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_wheel(directory):
    """The wheel of runner/, built from a clean copy: setuptools keeps
    build/ between builds, where a module deleted from the source lives on."""
    directory = Path(directory)
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "runner"
        shutil.copytree(RUNNER, source, ignore=LEFTOVERS)
        pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
        checked(run([*pip, "--wheel-dir", str(directory), str(source)], scratch))
    [wheel] = directory.glob("croniq_runner-*.whl")
    return wheel


def install(venv, wheel):
    """A virtualenv without pip holding `wheel` and what it depends on."""
    checked(run([sys.executable, "-m", "venv", "--without-pip", str(venv)], venv.parent))
    target = ["--python", str(venv / "bin" / "python")]
    checked(run([sys.executable, "-m", "pip", *target, "install", "--quiet", str(wheel)], venv))
    return venv / "bin"


@functools.cache
def runner_venv():
    """The bin directory of the cached virtualenv of the runner wheel."""
    venv = CACHE / source_hash()
    CACHE.mkdir(parents=True, exist_ok=True)
    # Two suites started together (make test) build it once between them.
    with open(CACHE / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = venv / ".ready"
        if not ready.exists():
            shutil.rmtree(venv, ignore_errors=True)  # a build cut short
            venv.mkdir()
            install(venv, build_wheel(venv / "wheel"))
            ready.touch()
            forget_old_builds(keep=venv)
    return venv / "bin"


def forget_old_builds(keep, now=None):
    """Remove the virtualenvs of earlier runner/ sources built over a day
    before `now` (a suite still running from one is long over)."""
    now = time.time() if now is None else now
    for stamp in CACHE.glob("*/.ready"):
        if stamp.parent != keep and stamp.stat().st_mtime < now - 86400:
            shutil.rmtree(stamp.parent, ignore_errors=True)
            Path(f"{stamp.parent}.lock").unlink(missing_ok=True)
