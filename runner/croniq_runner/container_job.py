"""One container job on the agent (docs/design.md §15): `ENGINE run --rm` of
its image under the job's supervisor, as a shell job's `sh -c` runs, so its
output is the run's log and its exit code the run's (engine.py builds the
command line).

The container is named after the run (engine.container_name) and never
outlives it:

- it ends: `--rm` removes it, and the agent removes it by name once the
  engine's command has ended (`rm -f`: one the command left behind, killed
  before it started, or created by a command killed meanwhile);
- a timeout, a cancel, a lost lease, self-fencing or a shutdown: SIGTERM
  through the engine (`kill --signal TERM`; asked again while there is no
  container yet, its image being pulled), then after the grace SIGKILL to
  the engine's command, and the removal ends the container with it. The
  engine's command passes no signal on (`--sig-proxy=false`), so the
  container gets the one SIGTERM the engine sends;
- the agent dies: the supervisor, seeing its pipe close, stops the
  container through the engine (SIGTERM, SIGKILL after the grace) before
  it ends the engine's command, and removes it (supervisor.py);
- the agent and its supervisors die together (a whole service's processes
  killed): the ledger names the container, and the next start of the
  agent removes it (ledger.py).

The engine's command runs as the agent's own user, whose engine answered at
start, not as --run-as: the container's user is the image's.

Standard library only.
"""

import logging
import os
import re
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from croniq_runner import engine as engines
from croniq_runner.engine import Engine
from croniq_runner.job import Job, StartRefused, run_variables

log = logging.getLogger("croniq.runner")

# An image reference (the server's rule: scheduler/apply/items.py IMAGE_RE),
# never starting with "-" (an option to the engine).
IMAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The engines' exit code when they could not run the container at all (no
# such image, no pull allowed, a bad option); docker and podman agree.
ENGINE_FAILED = 125
# How much of the end of the output is kept to say why the engine failed.
TAIL_BYTES = 4096
# How often a SIGTERM finding no container yet is tried again.
TERM_RETRY = 1.0
# The engines' hints after their error ("Run 'docker run --help' ...").
HINTS = ("Run '", "See '")


class ContainerError(StartRefused):
    """An assignment's `container` this agent cannot run: the run fails
    unstarted. Its words name the field, never its value (an env value may
    be one of the run's secrets)."""


@dataclass(frozen=True)
class Spec:
    """A container job's container, as its assignment's `container` gives it."""

    image: str
    args: tuple[str, ...]
    env: dict[str, str]
    pull: str
    network: str | None

    @classmethod
    def of(cls, value: Any) -> "Spec":
        if not isinstance(value, Mapping):
            raise ContainerError("container: no container in the assignment")
        image = value.get("image")
        if not isinstance(image, str) or not IMAGE_RE.fullmatch(image):
            raise ContainerError("container.image: not an image reference")
        args = value.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ContainerError("container.args: not a list of text")
        if any("\0" in a for a in args):
            raise ContainerError("container.args: an argument holds a NUL character")
        pull = value.get("pull") or "missing"
        if pull not in engines.PULL_POLICIES:
            raise ContainerError(
                f"container.pull: {pull!r} is not one of {', '.join(engines.PULL_POLICIES)}"
            )
        network = value.get("network")
        if network is not None and network not in engines.NETWORKS:
            raise ContainerError(
                f"container.network: {network!r} is not one of {', '.join(engines.NETWORKS)}"
            )
        return cls(image, tuple(args), env_of(value.get("env")), pull, network)

    def as_run(self) -> dict[str, Any]:
        """The fields engine.run_command reads."""
        return {
            "image": self.image,
            "args": list(self.args),
            "pull": self.pull,
            "network": self.network,
        }


def env_of(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ContainerError("container.env: not a mapping of names to text")
    env = {}
    for name, text in value.items():
        if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
            raise ContainerError("container.env: a name is not an environment variable name")
        if not isinstance(text, str):
            raise ContainerError(f"container.env.{name}: not text")
        # A resolved secret may hold a line break, which the engine's env
        # file cannot carry: it would end the variable and start another.
        if any(c in text for c in "\r\n\0"):
            raise ContainerError(
                f"container.env.{name}: a value is one line (the engine reads the "
                "environment a line a variable)"
            )
        env[name] = text
    return env


class ContainerJob(Job):
    """A Job whose run is a container the machine's engine runs (kind container)."""

    KIND = "container"

    def __init__(self, assignment: dict[str, Any], *, engine: Engine, **kwargs: Any) -> None:
        super().__init__(assignment, **kwargs)
        self.engine = engine
        self.spec: Spec | None = None
        self.name = engines.container_name(self.id, assignment.get("attempt"), self.session)
        self._tail = bytearray()
        self.removed = threading.Event()  # the engine has let the container go

    # -- what runs ----------------------------------------------------------

    def prepare(self) -> None:
        if self.limits.of_processes:
            # Held on the engine's command, a limit would hold nothing of the
            # container (the server refuses both on a container job).
            field = "max_memory" if self.limits.max_memory else "max_cpu_seconds"
            raise ContainerError(f"{field}: a container job's is the engine's to limit")
        self.spec = Spec.of(self.assignment.get("container"))
        self.account = None  # the engine's user: the agent's own

    def program(self) -> list[str]:
        assert self.spec is not None  # prepared
        labels = {
            "croniq.execution": str(self.id),
            "croniq.job": str(self.assignment.get("job", "")),
        }
        return engines.run_command(self.engine, self.name, self.spec.as_run(), labels)

    def supervisor_options(self) -> list[str]:
        # The supervisor stops the container if the agent dies.
        return ["--container", self.engine.path, self.name]

    def environment(self) -> dict[str, str]:
        return engines.engine_environment(os.environ)

    def input(self) -> str:
        """The env file the engine reads on its standard input: the
        container's env, the run's CRONIQ_* variables over it."""
        assert self.spec is not None  # prepared
        return engines.env_file({**self.spec.env, **run_variables(self.assignment)})

    def recorded(self) -> None:
        super().recorded()
        if self.ledger is not None and self.process is not None:
            self.ledger.add_container(self.engine.name, self.name, self.id)

    # -- killing --------------------------------------------------------------

    def _stop(self, signum: signal.Signals) -> None:
        if signum == signal.SIGTERM:
            # The engine's command passes no signal on: SIGTERM goes to the
            # container through the engine, from a thread (the engine may be
            # slow, and the caller holds the job's lock).
            self._thread(self._terminate_container, "stop")
            return
        # SIGKILL: the engine's command at once; the removal after it ends
        # the container (`_wait_for_exit`).
        self._signal(signum)

    def _terminate_container(self) -> None:
        """SIGTERM the container through the engine; while there is none yet
        (its image still being pulled), again every TERM_RETRY seconds until
        there is one, the run has ended, or SIGKILL's time has come (the
        engine's command then ends, and the container with it)."""
        while not engines.kill(self.engine, self.name, "TERM"):
            with self._lock:
                if not self.running or self.sigkill_sent:
                    return
            if self.done.wait(TERM_RETRY):
                return

    # -- ending ---------------------------------------------------------------

    def _wait_for_exit(self) -> None:
        super()._wait_for_exit()
        # The engine's command has ended: nothing can create the container
        # any more, and whatever is left of it goes now.
        if engines.remove(self.engine, self.name):
            self.removed.set()
            if self.ledger is not None:
                self.ledger.remove_container(self.name)
        else:
            log.error(
                "execution %s: container %s may be left on this machine (%s rm -f failed); "
                "the next start of this agent removes it",
                self.id,
                self.name,
                self.engine.name,
            )

    def seen(self, data: bytes) -> None:
        self._tail += data
        del self._tail[:-TAIL_BYTES]

    def result(self) -> dict[str, Any]:
        body = super().result()
        if body.get("exit_code") == ENGINE_FAILED and self.kill_reason is None:
            said = engine_error(bytes(self._tail))
            body["error"] = f"{self.engine.name} could not run the container (exit 125)" + (
                f": {said}" if said else ""
            )
        return body


def engine_error(tail: bytes) -> str:
    """The engine's own words at the end of the output: its last line that is
    not a hint to read its help."""
    lines = [line.strip() for line in tail.decode("utf-8", "replace").splitlines()]
    said = [line for line in lines if line and not line.startswith(HINTS)]
    return said[-1][:300] if said else ""
