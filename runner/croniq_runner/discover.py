"""`croniq-runner discover`: this machine's crontabs as an apply document
(docs/design.md §13).

    croniq-runner discover [--system] [--host NAME] [--timezone TZ] [--checks]

Reads the current user's crontab (`crontab -l`), or with --system the
system crontabs (/etc/crontab and /etc/cron.d/*, with their user field),
and prints the document `croniq-admin import_crontab` prints for the same
files (croniq_runner.crontab does both) on standard output, the report on
standard error. The jobs carry the label `host:NAME` (default: this
machine's hostname): start this machine's runner with `--labels host:NAME`.
With --checks it prints checks instead, one per line with a schedule, to
watch the lines while cron still runs them; the crontab that pings them
comes from the server after apply (`croniq-admin import_crontab --checks
--wrap`), which holds their tokens.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence

from croniq_runner.config import UsageError, _Parser
from croniq_runner.crontab import (
    Crontab,
    Entry,
    import_crontabs,
    machine_timezone,
    render,
    text_of,
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
USER_CRONTAB = "crontab -l"  # the name the report gives the user's crontab
# cron (Debian's run-parts rule) reads only /etc/cron.d files named like
# this: a package's left-overs (foo.dpkg-old, foo~, .placeholder) are not
# crontabs.
CRON_D_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="croniq-runner discover",
        description="Print this machine's crontab as a Croniq apply document (stdout) and "
        "a report of every line (stderr).",
    )
    parser.add_argument(
        "--system",
        action="store_true",
        help="read /etc/crontab and /etc/cron.d/* (with their user field) instead of "
        "the current user's crontab",
    )
    parser.add_argument(
        "--host",
        metavar="NAME",
        help="label the jobs host:NAME and start their names with it (default: the hostname)",
    )
    parser.add_argument(
        "--timezone",
        metavar="TZ",
        help="the zone of jobs no CRON_TZ= or TZ= line covers (default: this machine's)",
    )
    parser.add_argument(
        "--checks",
        action="store_true",
        help="a check for each line with a schedule (a `checks:` section), named as its "
        "job would be, instead of jobs: watch the lines while cron runs them",
    )
    return parser


Run = Callable[..., "subprocess.CompletedProcess[bytes]"]


def user_crontab(run: Run = subprocess.run) -> Crontab | None:
    """The current user's crontab; None when the user has none.
    OSError when `crontab -l` cannot run or fails otherwise."""
    try:
        done = run(["crontab", "-l"], capture_output=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise OSError(f"crontab -l: {error}") from None
    problem = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode != 0:
        if "no crontab for" in problem:
            return None
        raise OSError(f"crontab -l exited {done.returncode}: {problem}")
    return Crontab(USER_CRONTAB, text_of(done.stdout))


def system_crontabs(root: str = "/") -> tuple[list[Crontab], list[Entry]]:
    """/etc/crontab and /etc/cron.d/* (in name order), and a report entry
    for each file cron itself would not read."""
    crontabs: list[Crontab] = []
    ignored: list[Entry] = []
    main_file = os.path.join(root, "etc/crontab")
    if os.path.isfile(main_file):
        crontabs.append(Crontab("/etc/crontab", _read(main_file)))  # unreadable: OSError
    directory = os.path.join(root, "etc/cron.d")
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    for name in names:
        path = os.path.join(directory, name)
        shown = f"/etc/cron.d/{name}"
        if not os.path.isfile(path):
            continue
        if not CRON_D_NAME_RE.fullmatch(name):
            reason = "cron reads only files named with letters, digits, '_' and '-'"
            ignored.append(Entry(shown, 0, reason, skipped=True))
            continue
        try:
            crontabs.append(Crontab(shown, _read(path)))
        except OSError as error:
            ignored.append(Entry(shown, 0, f"cannot read it: {error.strerror}", skipped=True))
    return crontabs, ignored


def _read(path: str) -> str:
    with open(path, "rb") as handle:
        return text_of(handle.read())


def main(argv: Sequence[str], run: Run = subprocess.run, root: str = "/") -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        build_parser().print_usage(sys.stderr)
        print(f"croniq-runner discover: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as done:  # --help
        return int(done.code or 0)
    host = args.host if args.host is not None else socket.gethostname().split(".")[0]
    timezone = args.timezone or machine_timezone(root=root)
    ignored: list[Entry] = []
    try:
        if args.system:
            crontabs, ignored = system_crontabs(root)
        else:
            found = user_crontab(run)
            crontabs = [found] if found is not None else []
            if found is None:
                print("croniq-runner discover: this user has no crontab", file=sys.stderr)
        imported = import_crontabs(
            crontabs, timezone=timezone, system=args.system, host=host, checks=args.checks
        )
    except ValueError as error:
        print(f"croniq-runner discover: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:
        print(f"croniq-runner discover: error: {error}", file=sys.stderr)
        return EXIT_FAILED
    imported.report[:0] = ignored
    sys.stdout.write(render(imported))
    sys.stderr.write(imported.report_text())
    return EXIT_OK
