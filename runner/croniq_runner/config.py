"""Command line and environment of croniq-runner (docs/design.md §5).

A flag wins over its environment variable, which wins over the default.
Standard library only.
"""

import argparse
import ctypes
import math
import os
import pwd
import re
import socket
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

from croniq_runner import __version__ as VERSION
from croniq_runner.engine import CHOICES as ENGINE_CHOICES

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

N = TypeVar("N", int, float)

# A user name as a job's `run_as` takes it: the server's rule
# (scheduler/jobs/models.py RUN_AS_RE, and not all digits), so a name this
# agent allows is one a job can name.
USER_RE = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,31}")


class UsageError(Exception):
    """A missing or invalid setting; the agent exits 2."""


class SetupError(UsageError):
    """A setting the machine cannot honour (not root, no such user): one
    line, no usage text; the agent exits 2."""


@dataclass(frozen=True)
class Account:
    """The user jobs run as (--run-as)."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str


@dataclass(frozen=True)
class Config:
    server: str
    token: str
    name: str
    labels: list[str] = field(default_factory=list)
    capacity: int = 1
    work_dir: str = "."
    log_level: str = "INFO"
    once: bool = False
    drain_timeout: float = 60.0
    kill_grace: float = 10.0
    poll_wait: float = 20.0
    state_dir: str = ""
    state_dir_given: bool = False  # else a default that may be unusable
    run_as: Account | None = None
    # The users a job's `run_as` may name (--allow-run-as); none: every job
    # that names one fails without running.
    allow_run_as: tuple[str, ...] = ()
    token_on_command_line: bool = False
    # The container engine (--engine): docker, podman, auto (the first that
    # answers at start) or none. Built by hand, a Config runs no container
    # jobs; the command line's default is auto.
    engine: str = "none"
    # --cgroups: limit jobs' memory and count their CPU in cgroups where the
    # agent may make them (auto), or by setrlimit and /proc only (off).
    cgroups: bool = True


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="croniq-runner",
        description="Pull Croniq executions from a server and run them as `sh -c COMMAND`.",
        epilog="Each flag may also come from the environment variable shown in brackets. "
        "Also: `croniq-runner discover [--system] [--host NAME] [--checks]` prints this machine's "
        "crontab as an apply document; `croniq-runner wrap --check=TOKEN -- command` "
        "runs a command and pings a Croniq check.",
    )
    add = parser.add_argument
    add(
        "--server", metavar="URL", help="Croniq server, e.g. https://croniq.example [CRONIQ_SERVER]"
    )
    add("--token", help="runner token from `manage.py create_runner_token` [CRONIQ_TOKEN]")
    add("--token-file", metavar="PATH", help="read the token from a file [CRONIQ_TOKEN_FILE]")
    add("--name", help="runner identity (default: the hostname) [CRONIQ_RUNNER_NAME]")
    add("--labels", metavar="A,B", help="comma-separated labels jobs may require [CRONIQ_LABELS]")
    add("--capacity", metavar="N", help="executions run at once (default 1) [CRONIQ_CAPACITY]")
    add(
        "--work-dir",
        metavar="DIR",
        help="working directory of jobs (default: current) [CRONIQ_WORK_DIR]",
    )
    add(
        "--state-dir",
        metavar="DIR",
        help="where the agent keeps the ledger of its jobs' process groups, a directory "
        "of the agent's user that no one else may write to (default: "
        "$XDG_STATE_HOME/croniq-runner/NAME or ~/.local/state/croniq-runner/NAME) "
        "[CRONIQ_STATE_DIR]",
    )
    add(
        "--run-as",
        metavar="USER",
        help="run jobs as this user (the agent must run as root) [CRONIQ_RUN_AS]",
    )
    add(
        "--allow-run-as",
        metavar="USER,USER",
        help="comma-separated users a job's run_as may name (default: none; a job naming "
        "another user fails without running; the agent must run as root, or allow only "
        "its own user) [CRONIQ_ALLOW_RUN_AS]",
    )
    add(
        "--engine",
        metavar="ENGINE",
        help="the container engine that runs container jobs: docker, podman, auto (the first "
        "of docker and podman that answers at start; the default) or none; with one, the "
        "runner carries the label `container` [CRONIQ_ENGINE]",
    )
    add(
        "--log-level",
        metavar="LEVEL",
        help="DEBUG, INFO (default), WARNING, ERROR [CRONIQ_LOG_LEVEL]",
    )
    add("--once", action="store_true", help="one poll; run the execution it brings, if any; exit")
    add(
        "--drain-timeout",
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, let running jobs finish this long before killing them "
        "(default 60) [CRONIQ_DRAIN_TIMEOUT]",
    )
    add(
        "--kill-grace",
        metavar="SECONDS",
        help="SIGTERM to SIGKILL delay when a job is cancelled or timed out (default 10) "
        "[CRONIQ_KILL_GRACE]",
    )
    add(
        "--poll-wait",
        metavar="SECONDS",
        help="how long one long-poll waits for work, 0-60 (default 20) [CRONIQ_POLL_WAIT]",
    )
    add(
        "--cgroups",
        metavar="auto|off",
        help="auto (default): hold a job's max_memory and count its CPU in a cgroup where the "
        "agent may make one (cgroup v2 delegated to it, or v1), else by setrlimit; off: "
        "setrlimit and /proc only [CRONIQ_CGROUPS]",
    )
    add("--version", action="version", version=f"croniq-runner {VERSION}")
    return parser


def _pick(
    args: argparse.Namespace,
    flag: str,
    environ: Mapping[str, str],
    var: str,
    default: str | None = None,
) -> tuple[Any, str]:
    """(value, where it came from) for one setting."""
    value = getattr(args, flag.replace("-", "_"))
    if value is not None:
        return value, f"--{flag}"
    if environ.get(var, "") != "":
        return environ[var], var
    return default, var


def _number(
    value: Any, source: str, kind: Callable[[Any], N], low: float, high: float | None = None
) -> N:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise UsageError(f"{source}: expected a number, got {value!r}") from None
    if not math.isfinite(number):  # float("nan") and float("inf") parse
        raise UsageError(f"{source}: expected a finite number, got {value!r}")
    if number < low or (high is not None and number > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise UsageError(f"{source}: must be {bounds}, got {value!r}")
    return number


def parse_labels(text: str | None) -> list[str]:
    """'linux, gpu,,x86' -> ['linux', 'gpu', 'x86']"""
    return [label.strip() for label in (text or "").split(",") if label.strip()]


def _token(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    token, _ = _pick(args, "token", environ, "CRONIQ_TOKEN")
    if token:
        return token.strip()
    path, source = _pick(args, "token-file", environ, "CRONIQ_TOKEN_FILE")
    if not path:
        raise UsageError("no token: pass --token or set CRONIQ_TOKEN (or --token-file)")
    try:
        with open(path) as handle:
            token = handle.read().strip()
    except OSError as error:
        raise UsageError(f"{source}: cannot read {path}: {error.strerror}") from None
    if not token:
        raise UsageError(f"{source}: {path} is empty")
    return token


def default_state_dir(name: str, environ: Mapping[str, str]) -> str:
    base = environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "croniq-runner", re.sub(r"[^A-Za-z0-9._-]", "_", name))


def account(user: str, source: str) -> Account:
    """The Account of `user` (a name or a uid); UsageError unless root."""
    try:
        entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    except KeyError:
        raise SetupError(f"{source}: no such user {user!r}") from None
    if os.geteuid() != 0:
        raise SetupError(f"{source}: running jobs as {user!r} needs the agent to run as root")
    groups = os.getgrouplist(entry.pw_name, entry.pw_gid)
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, tuple(groups), entry.pw_dir)


def allowed_users(text: str | None, source: str) -> tuple[str, ...]:
    """The users of --allow-run-as ('postgres, root' -> ('postgres', 'root')),
    each one that exists and that this agent can run a command as; a blank
    value allows none. UsageError for an empty or malformed name, and for
    `*`: the operator names each user (a wildcard would hand root to
    whoever may write jobs)."""
    if not text or not text.strip():
        return ()
    names: list[str] = []
    for name in (part.strip() for part in text.split(",")):
        if not name:
            raise UsageError(f"{source}: an empty user name in {text!r} (USER[,USER...])")
        if name == "*":
            raise UsageError(f"{source}: '*' is not supported: name each user jobs may run as")
        if not USER_RE.fullmatch(name) or name.isdigit():
            raise UsageError(
                f"{source}: {name!r} is not a user name (letters, digits, '.', '_' and '-', "
                "not starting with '-', not all digits, at most 32 characters)"
            )
        runnable(name, source)
        if name not in names:
            names.append(name)
    return tuple(names)


def runnable(name: str, source: str) -> None:
    """SetupError unless the agent can run a command as user `name`: it
    exists, and it is the agent's own user or the agent is root."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise SetupError(f"{source}: no such user {name!r}") from None
    if os.geteuid() != 0 and entry.pw_uid != os.geteuid():
        raise SetupError(f"{source}: running jobs as {name!r} needs the agent to run as root")


def forget_token(environ: MutableMapping[str, str] = os.environ) -> None:
    """Drop CRONIQ_TOKEN from this process's environment, so no process of
    the same user reads it in /proc/PID/environ. That file shows the
    environment the process was started with; unsetenv() does not erase
    those bytes, so the value is overwritten in place first (glibc/musl)."""
    name = b"CRONIQ_TOKEN="
    if "CRONIQ_TOKEN" not in environ:
        return
    try:
        libc = ctypes.CDLL(None)
        table = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
        index = 0
        while table[index]:
            entry = ctypes.string_at(table[index])
            if entry.startswith(name):
                ctypes.memset(table[index] + len(name), ord("x"), len(entry) - len(name))
            index += 1
    except (OSError, ValueError, AttributeError):
        pass  # no C environ to reach: os.environ below is all there is
    del environ["CRONIQ_TOKEN"]


def parse_args(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> Config:
    """The agent's Config from `argv` and `environ`; UsageError when unusable."""
    environ = os.environ if environ is None else environ
    args = build_parser().parse_args(argv)

    server, _ = _pick(args, "server", environ, "CRONIQ_SERVER")
    if not server:
        raise UsageError("no server: pass --server URL or set CRONIQ_SERVER")
    if not server.startswith(("http://", "https://")):
        raise UsageError(f"server must be an http:// or https:// URL, got {server!r}")

    name, _ = _pick(args, "name", environ, "CRONIQ_RUNNER_NAME", socket.gethostname())
    if not name.strip():
        raise UsageError("runner name must not be empty")
    labels, _ = _pick(args, "labels", environ, "CRONIQ_LABELS", "")
    capacity = _number(*_pick(args, "capacity", environ, "CRONIQ_CAPACITY", "1"), int, 1, 1000)
    work_dir, source = _pick(args, "work-dir", environ, "CRONIQ_WORK_DIR", os.getcwd())
    if not os.path.isdir(work_dir):
        raise UsageError(f"{source}: {work_dir!r} is not a directory")
    level, source = _pick(args, "log-level", environ, "CRONIQ_LOG_LEVEL", "INFO")
    if level.upper() not in LOG_LEVELS:
        raise UsageError(f"{source}: expected one of {', '.join(LOG_LEVELS)}, got {level!r}")

    engine, source = _pick(args, "engine", environ, "CRONIQ_ENGINE", "auto")
    if engine.strip().lower() not in ENGINE_CHOICES:
        raise UsageError(f"{source}: expected one of {', '.join(ENGINE_CHOICES)}, got {engine!r}")

    state_dir, _ = _pick(args, "state-dir", environ, "CRONIQ_STATE_DIR")
    run_as, source = _pick(args, "run-as", environ, "CRONIQ_RUN_AS")
    allowed, allowed_source = _pick(args, "allow-run-as", environ, "CRONIQ_ALLOW_RUN_AS")
    cgroups, source_cgroups = _pick(args, "cgroups", environ, "CRONIQ_CGROUPS", "auto")
    if cgroups.strip().lower() not in ("auto", "off"):
        raise UsageError(f"{source_cgroups}: expected auto or off, got {cgroups!r}")

    return Config(
        server=server.rstrip("/"),
        token=_token(args, environ),
        name=name.strip(),
        labels=parse_labels(labels),
        capacity=capacity,
        work_dir=os.path.abspath(work_dir),
        log_level=level.upper(),
        once=args.once,
        drain_timeout=_number(
            *_pick(args, "drain-timeout", environ, "CRONIQ_DRAIN_TIMEOUT", "60"), float, 0
        ),
        kill_grace=_number(
            *_pick(args, "kill-grace", environ, "CRONIQ_KILL_GRACE", "10"), float, 0
        ),
        poll_wait=_number(
            *_pick(args, "poll-wait", environ, "CRONIQ_POLL_WAIT", "20"), float, 0, 60
        ),
        state_dir=os.path.abspath(state_dir or default_state_dir(name.strip(), environ)),
        state_dir_given=bool(state_dir),
        run_as=account(run_as.strip(), source) if run_as and run_as.strip() else None,
        allow_run_as=allowed_users(allowed, allowed_source),
        token_on_command_line=args.token is not None,
        engine=engine.strip().lower(),
        cgroups=cgroups.strip().lower() == "auto",
    )
