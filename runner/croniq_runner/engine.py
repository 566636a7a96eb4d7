"""The container engine of the runner's machine (docs/design.md §15):
docker or podman, whose command line runs a container job's image.

`--engine docker|podman|auto|none` chooses it when the agent starts; auto
takes the first of docker and podman whose `version` answers within
PROBE_TIMEOUT, none takes neither. Only an agent with an engine announces
the feature `container` and carries the label `container`.

Both command lines take the same words for what the agent asks of them:
`run` (the container, attached: its output is the command's, its exit code
the command's), `kill` and `rm -f` (the container by its name, which the
agent chose). The container's environment reaches the engine through an
env file read from the command's standard input (`--env-file
/dev/stdin`): never on its command line, which every user of the machine
reads in /proc, nor in the command's own environment, where a job's
variable could change what the engine's command does (DOCKER_HOST,
CONTAINER_HOST, HOME), nor in a file left on disk if the agent dies.

Standard library only.
"""

import logging
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("croniq.runner")

ENGINES = ("docker", "podman")
CHOICES = (*ENGINES, "auto", "none")
# How long `ENGINE version` may take at the agent's start before the engine
# counts as not answering (a daemon that is down answers at once).
PROBE_TIMEOUT = 10.0
# How long a kill or a removal may take before the agent gives up on it.
COMMAND_TIMEOUT = 30.0
PULL_POLICIES = ("missing", "always", "never")
NETWORKS = ("none", "bridge", "host")
# Every container the agent starts is named so, and labelled with its run.
NAME_PREFIX = "croniq-"
# The engines' words for a container that is not (or no longer) there.
ABSENT = ("no such container", "not running", "no container with name", "state improper")


class EngineMissing(Exception):
    """The engine named by --engine did not answer; the agent exits 2."""


@dataclass(frozen=True)
class Engine:
    """A container engine's command line: `name` (docker or podman) at `path`."""

    name: str
    path: str


def probe(name: str, timeout: float = PROBE_TIMEOUT) -> Engine | str:
    """The engine `name` if `name version` answers within `timeout`
    seconds, else why not (a few words)."""
    path = shutil.which(name)
    if path is None:
        return "not installed"
    try:
        result = subprocess.run(
            [path, "version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"`{name} version` did not answer within {timeout:g}s"
    except OSError as error:
        return f"cannot run {path}: {error.strerror}"
    if result.returncode != 0:
        words = last_line(result.stderr) or f"exit code {result.returncode}"
        return f"`{name} version` failed: {words}"
    return Engine(name, path)


def detect(choice: str, timeout: float = PROBE_TIMEOUT) -> Engine | None:
    """The engine `choice` (--engine) gives: None for none, or auto finding
    neither (said in the log); EngineMissing for an engine named and not
    answering (its operator asked for container jobs here)."""
    if choice == "none":
        return None
    names = ENGINES if choice == "auto" else (choice,)
    reasons = []
    for name in names:
        found = probe(name, timeout)
        if isinstance(found, Engine):
            log.info("container jobs run with %s (%s)", found.name, found.path)
            return found
        reasons.append(f"{name}: {found}")
    if choice != "auto":
        raise EngineMissing(f"--engine {choice}: {reasons[0].split(': ', 1)[1]}")
    log.info(
        "no container engine answered (%s): container jobs go to other runners",
        "; ".join(reasons),
    )
    return None


def container_name(execution_id: Any, attempt: Any, session: str) -> str:
    """The name of a run's container: its execution, its attempt and the
    start of the agent's session, so that two agents (or a test server's
    runs numbered anew) never ask the engine for one name twice."""
    return f"{NAME_PREFIX}{execution_id}-{attempt}-{session[:8]}"


def run_command(
    engine: Engine, name: str, spec: Mapping[str, Any], labels: dict[str, str]
) -> list[str]:
    """`ENGINE run` of a container job's `spec` (checked: container_job.Spec):
    removed when it ends, named `name`, its environment read from standard
    input, signals only through the engine (`--sig-proxy=false`: the agent
    signals the container by its name, and the command only carries its
    output and exit code)."""
    args = [engine.path, "run", "--rm", "--name", name, "--pull", spec["pull"]]
    if spec.get("network"):
        args += ["--network", spec["network"]]
    args += ["--env-file", "/dev/stdin", "--sig-proxy=false"]
    for key, value in labels.items():
        args += ["--label", f"{key}={value}"]
    # After `--` the image is never read as an option, whatever it holds.
    return [*args, "--", spec["image"], *spec["args"]]


def env_file(env: Mapping[str, str]) -> str:
    """`env` as the engines read an env file: NAME=VALUE a line (the values
    are checked to be one line: container_job.Spec)."""
    return "".join(f"{name}={value}\n" for name, value in env.items())


def kill(engine: Engine, name: str, signal_name: str = "KILL") -> bool:
    """Send the container `name` SIGTERM or SIGKILL (`signal_name`) through
    the engine. Whether it was there to be signalled."""
    done, _ = command(engine, ["kill", "--signal", signal_name, name])
    return done


def remove(engine: Engine, name: str) -> bool:
    """End and remove the container `name` (`rm -f`), there or not. Whether
    the engine answered: False when it failed (said in the log)."""
    done, absent = command(engine, ["rm", "-f", name])
    return done or absent


def command(engine: Engine, args: list[str]) -> tuple[bool, bool]:
    """(done, absent) of `ENGINE args...`: whether it succeeded, and whether
    it failed only because the container is not (or no longer) there."""
    try:
        result = subprocess.run(
            [engine.path, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
            env=engine_environment(os.environ),
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        log.warning("`%s %s` failed: %s", engine.name, " ".join(args), error)
        return False, False
    said = result.stderr.decode("utf-8", "replace")
    # docker 28's `rm -f` says a missing container is missing and exits 0.
    absent = any(words in said.lower() for words in ABSENT)
    if result.returncode == 0 and not absent:
        return True, False
    if not absent:
        log.warning("`%s %s` failed: %s", engine.name, " ".join(args), last_line(result.stderr))
    return False, absent


# Never handed to the engine's command line: a job must not act as the runner.
SECRET_ENV = ("CRONIQ_TOKEN", "CRONIQ_TOKEN_FILE")


def engine_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The environment of the engine's command: the agent's (its DOCKER_HOST,
    XDG_RUNTIME_DIR, PATH, HOME), the runner's credentials left out."""
    return {k: v for k, v in base.items() if k not in SECRET_ENV}


def last_line(output: bytes) -> str:
    lines = [line.strip() for line in output.decode("utf-8", "replace").splitlines()]
    return next((line for line in reversed(lines) if line), "")[:300]
