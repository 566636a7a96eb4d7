"""`croniq-runner wrap`: run a command and tell a Croniq check how it went
(docs/design.md §12).

    croniq-runner wrap --check=TOKEN [--server URL] -- command args...

Pings `/ping/TOKEN/start`, runs the command with this process's standard
input, its output passed through as it comes, then pings `/ping/TOKEN` (exit
status 0) or `/ping/TOKEN/STATUS` with the last 10 KB of the output as the
body, and exits with the command's status (128 + N for a command killed by
signal N, as shells report it). The pings never change the command's
outcome: a server that is down, slow or refuses a ping costs a line on
standard error and at most a few seconds, and the command runs even when no
server is configured (cron's environment often lacks CRONIQ_SERVER).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any, BinaryIO

import requests

from croniq_runner import __version__
from croniq_runner.config import UsageError, _Parser

TAIL_BYTES = 10 * 1024
# A ping waits this long at most for a connection and for its answer: the
# command's run must not stretch much because Croniq is unreachable.
PING_TIMEOUT = (3.0, 5.0)
EXIT_USAGE = 2
EXIT_NOT_EXECUTABLE = 126  # as sh reports a command it cannot run
EXIT_NOT_FOUND = 127
Handler = Any  # what signal.signal returns and takes back
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="croniq-runner wrap",
        description="Run a command and ping a Croniq check: start, then success or "
        "the exit status with the last 10 KB of output. Exits with the command's status.",
        usage="%(prog)s --check=TOKEN [--server URL] -- command [args...]",
    )
    parser.add_argument("--check", metavar="TOKEN", required=True, help="the check's ping token")
    parser.add_argument(
        "--server",
        metavar="URL",
        help="Croniq server, e.g. https://croniq.example [CRONIQ_SERVER]; without one the "
        "command runs and no ping is sent",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")
    return parser


class Tail:
    """The last `limit` bytes written to it, from several threads."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self._data = bytearray()
        self._lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self._data += chunk
            if len(self._data) > self.limit:
                del self._data[: len(self._data) - self.limit]

    def value(self) -> bytes:
        with self._lock:
            return bytes(self._data)


class Pinger:
    """Sends pings of one check; a failure is a line on stderr, never raised."""

    def __init__(self, server: str | None, token: str, err: BinaryIO | None = None) -> None:
        self.base = f"{server.rstrip('/')}/ping/{token}" if server else None
        self.err = err
        self.session = requests.Session()
        self.session.headers["User-Agent"] = f"croniq-runner/{__version__} wrap"

    def send(self, suffix: str = "", body: bytes = b"") -> bool:
        if self.base is None:
            return False
        url = self.base + suffix
        try:
            response = self.session.post(
                url,
                data=body,
                headers={"Content-Type": "text/plain; charset=utf-8"},
                timeout=PING_TIMEOUT,
            )
        except requests.RequestException as error:
            self._warn(f"ping {suffix or '(success)'} not sent: {type(error).__name__}: {error}")
            return False
        if response.status_code >= 300:
            self._warn(f"ping {suffix or '(success)'} answered {response.status_code}")
            return False
        return True

    def _warn(self, message: str) -> None:
        text = f"croniq-runner wrap: {message}\n".encode("utf-8", "replace")
        if self.err is not None:
            self.err.write(text)
            self.err.flush()


def _copy(source: BinaryIO, target: BinaryIO, tail: Tail) -> None:
    """Pass the command's output on as it comes, keeping its tail."""
    while chunk := os.read(source.fileno(), 65536):
        tail.add(chunk)
        try:
            target.write(chunk)
            target.flush()
        except (OSError, ValueError):
            pass  # our own output closed: the command still runs to its end
    source.close()


def run(
    command: Sequence[str],
    pinger: Pinger,
    out: BinaryIO,
    err: BinaryIO,
) -> int:
    """Ping start, run `command`, ping its end; its exit status."""
    pinger.send("/start")
    tail = Tail()
    try:
        child = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as error:
        status = EXIT_NOT_FOUND if isinstance(error, FileNotFoundError) else EXIT_NOT_EXECUTABLE
        message = f"croniq-runner wrap: cannot run {command[0]}: {error.strerror}\n".encode()
        err.write(message)
        err.flush()
        pinger.send(f"/{status}", message)
        return status
    previous = _forward_signals(child)
    try:
        assert child.stdout is not None and child.stderr is not None
        copiers = [
            threading.Thread(target=_copy, args=(child.stdout, out, tail), daemon=True),
            threading.Thread(target=_copy, args=(child.stderr, err, tail), daemon=True),
        ]
        for copier in copiers:
            copier.start()
        returncode = child.wait()
        for copier in copiers:
            copier.join()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    status = 128 - returncode if returncode < 0 else returncode
    pinger.send("" if status == 0 else f"/{status}", tail.value())
    return status


def _forward_signals(child: subprocess.Popen[bytes]) -> dict[int, Handler]:
    """cron or an operator stopping wrap stops the command; wrap then
    reports how it ended."""

    def forward(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):  # it has just ended
            child.send_signal(signum)

    previous: dict[int, Handler] = {}
    if threading.current_thread() is not threading.main_thread():
        return previous  # signal handlers belong to the main thread (tests call run there)
    for signum in FORWARDED_SIGNALS:
        previous[signum] = signal.signal(signum, forward)
    return previous


def main(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> int:
    environ = os.environ if environ is None else environ
    err = sys.stderr.buffer
    try:
        args = build_parser().parse_args(argv)
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            raise UsageError("no command: croniq-runner wrap --check=TOKEN -- command args...")
        if not args.check.strip() or "/" in args.check:
            raise UsageError(f"--check: {args.check!r} is not a ping token")
    except UsageError as error:
        build_parser().print_usage(sys.stderr)
        print(f"croniq-runner wrap: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as done:  # --help
        return int(done.code or 0)
    server = args.server or environ.get("CRONIQ_SERVER", "")
    if not server.startswith(("http://", "https://")):
        source = "--server" if args.server else "CRONIQ_SERVER"
        reason = f"{source} is not an http(s) URL: {server!r}" if server else "no server"
        print(
            f"croniq-runner wrap: {reason} (pass --server URL or set CRONIQ_SERVER): "
            "running the command without pings",
            file=sys.stderr,
        )
        server = ""
    pinger = Pinger(server or None, args.check.strip(), err)
    return run(command, pinger, sys.stdout.buffer, err)
