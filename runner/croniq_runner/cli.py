"""`croniq`: the management API (docs/design.md §8) from a shell (docs/design.md §5).

    croniq [--server URL] [--api-key-file PATH] [--json] GROUP VERB ...

The server comes from --server or CRONIQ_SERVER; the API key from the file
--api-key-file names or from CRONIQ_API_KEY (never from the command line,
where other users of the machine could read it). Lists are read to their
end (or --limit). Standard library and requests only.
"""

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from croniq_runner import __version__, cli_commands, cli_mcp
from croniq_runner.cli_api import (
    EXIT_AUTH,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    Api,
    Failed,
)

EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}  done
  {EXIT_REFUSED}  refused by the server (a 4xx other than 401/403; its detail is printed)
  {EXIT_USAGE}  usage: bad arguments, no server or key, an unreadable file
  {EXIT_AUTH}  the API key was refused (401) or lacks the call's scope (403)
  {EXIT_UNREACHABLE}  the server is unreachable: no connection, no answer in time, or a
     5xx after a short retry
`executions logs ID --follow` exits with the job's exit code instead; 1 when the
run ended without one (lost, timed out, cancelled, killed by a signal).
"""


def common_options(leaf: bool) -> argparse.ArgumentParser:
    """--server, --api-key-file and --json, accepted before the command and
    after it: a leaf's default is SUPPRESS, so it keeps what came before."""
    parser = argparse.ArgumentParser(add_help=False)
    unset = argparse.SUPPRESS if leaf else None
    parser.add_argument(
        "--server", metavar="URL", default=unset, help="the Croniq server [CRONIQ_SERVER]"
    )
    parser.add_argument(
        "--api-key-file",
        metavar="PATH",
        default=unset,
        help="a file holding the API key (else the key itself in CRONIQ_API_KEY)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if leaf else False,
        help="print the API's JSON answer, for scripts",
    )
    return parser


def env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


# A time argument goes to the server as typed: a bare date or date and time
# (2026-12-08, 2026-12-08T09:00) is read there on the job's clock, which
# only the server knows (docs/design.md §8); an offset keeps it exact.
INSTANT = "ISO"
JOB_CLOCK = "ISO 8601; without an offset (2026-12-08, 2026-12-08T09:00) in the job's timezone"
# Where a secret is without --project: the server's answer (docs/design.md §11).
KEYS_PROJECT = "default: the key's own project, or default for a global key"


def positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return number


class Commands:
    """Adds `GROUP VERB` parsers, each running a function of cli_commands."""

    def __init__(
        self,
        subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]",
        parent: argparse.ArgumentParser,
    ) -> None:
        self.subparsers = subparsers
        self.parent = parent

    def group(self, name: str, help: str) -> "Commands":
        parser = self.subparsers.add_parser(name, help=help, description=help)
        return Commands(
            parser.add_subparsers(dest="verb", metavar="VERB", required=True), self.parent
        )

    def add(self, name: str, run: Callable[..., int], help: str) -> argparse.ArgumentParser:
        parser = self.subparsers.add_parser(
            name, help=help, description=help, parents=[self.parent]
        )
        parser.set_defaults(run=run)
        return parser


def add_jobs(commands: Commands) -> None:
    jobs = commands.group("jobs", "jobs by name")
    listing = jobs.add("list", cli_commands.jobs_list, "list jobs")
    listing.add_argument("--project", help="only this project's jobs")
    listing.add_argument("--label", help="only jobs with this label")
    listing.add_argument("--name", metavar="PREFIX", help="only jobs whose name starts so")
    listing.add_argument("--limit", type=positive, help="at most this many (default: all)")
    jobs.add("show", cli_commands.jobs_show, "one job").add_argument("name")

    trigger = jobs.add("trigger", cli_commands.jobs_trigger, "run a job now")
    trigger.add_argument("name")
    trigger.add_argument(
        "--idempotency-key", metavar="KEY", help="a retried trigger with the same key runs once"
    )
    trigger.add_argument(
        "--env",
        metavar="KEY=VALUE",
        type=env_pair,
        action="extend",
        nargs="+",
        help="set a parameter the job declares (repeatable)",
    )
    trigger.add_argument(
        "--scheduled-for", metavar=INSTANT, help=f"the run's scheduled instant ({JOB_CLOCK})"
    )

    pause = jobs.add("pause", cli_commands.jobs_pause, "stop a job from firing")
    pause.add_argument("name")
    pause.add_argument("--reason", help="why, shown to other operators")
    pause.add_argument(
        "--until", metavar=INSTANT, help=f"resume by itself at this instant ({JOB_CLOCK})"
    )
    jobs.add("resume", cli_commands.jobs_resume, "let a paused job fire again").add_argument("name")

    backfill = jobs.add(
        "backfill", cli_commands.jobs_backfill, "run a job for its past instants in a range"
    )
    backfill.add_argument("name")
    backfill.add_argument("--start", metavar=INSTANT, required=True, help=f"from ({JOB_CLOCK})")
    backfill.add_argument("--end", metavar=INSTANT, required=True, help="until, not included")
    backfill.add_argument("--dry-run", action="store_true", help="show the instants only")

    upcoming = jobs.add("next", cli_commands.jobs_next, "the next fire instants of a job")
    upcoming.add_argument("name")
    upcoming.add_argument("--count", type=positive, default=10, help="how many (default 10)")
    upcoming.add_argument(
        "--after", metavar=INSTANT, help=f"strictly after this (default: now; {JOB_CLOCK})"
    )


def add_executions(commands: Commands) -> None:
    executions = commands.group("executions", "runs of jobs")
    listing = executions.add("list", cli_commands.executions_list, "executions, newest first")
    listing.add_argument("--job", help="only this job's")
    listing.add_argument("--state", help="only in this state (pending, running, failed, ...)")
    listing.add_argument("--limit", type=positive, help="at most this many (default: all)")
    executions.add("show", cli_commands.executions_show, "one execution").add_argument(
        "id", type=int
    )
    logs = executions.add("logs", cli_commands.executions_logs, "an execution's output")
    logs.add_argument("id", type=int)
    logs.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="print new output until the run ends, then exit with the job's exit code "
        "(1 when it has none: lost, timed out, cancelled)",
    )
    executions.add("cancel", cli_commands.executions_cancel, "stop an execution").add_argument(
        "id", type=int
    )
    executions.add(
        "retry", cli_commands.executions_retry, "run a finished execution again"
    ).add_argument("id", type=int)


def add_apply(
    subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]",
    parent: argparse.ArgumentParser,
) -> None:
    help = "apply a file of jobs and calendars (YAML, or JSON named *.json), all or nothing"
    apply = subparsers.add_parser("apply", help=help, description=help, parents=[parent])
    apply.set_defaults(run=cli_commands.apply_file)
    apply.add_argument("file")
    apply.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    apply.add_argument(
        "--prune", action="store_true", help="delete what apply made that the file no longer lists"
    )
    apply.add_argument(
        "--source",
        help="the name the file's jobs and calendars are managed under, which --prune "
        "keeps to (default: the file's name without its extension, as manage.py apply)",
    )


def add_runners(commands: Commands) -> None:
    runners = commands.group("runners", "the machines that run jobs")
    listing = runners.add("list", cli_commands.runners_list, "list runners")
    listing.add_argument("--state", help="online, draining or offline")
    listing.add_argument("--limit", type=positive, help="at most this many (default: all)")
    runners.add("drain", cli_commands.runners_drain, "give a runner no new work").add_argument(
        "id", type=int
    )


def add_secrets(commands: Commands) -> None:
    secrets = commands.group("secrets", "values handed to jobs' runs, masked in their output")
    setting = secrets.add(
        "set",
        cli_commands.secrets_set,
        "create a secret or replace its value, read from standard input (typed without "
        "echo at a terminal; one trailing newline dropped)",
    )
    setting.add_argument("name")
    setting.add_argument("--project", help=f"the project it belongs to ({KEYS_PROJECT})")
    listing = secrets.add("list", cli_commands.secrets_list, "list secrets (never their values)")
    listing.add_argument("--project", help=f"this project's secrets ({KEYS_PROJECT})")
    listing.add_argument("--limit", type=positive, help="at most this many (default: all)")
    deleting = secrets.add("delete", cli_commands.secrets_delete, "delete a secret")
    deleting.add_argument("name")
    deleting.add_argument("--project", help=f"the project it belongs to ({KEYS_PROJECT})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="croniq",
        description="Manage a Croniq server through its management API.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common_options(leaf=False)],
    )
    parser.add_argument("--version", action="version", version=f"croniq {__version__}")
    subparsers = parser.add_subparsers(dest="group", metavar="GROUP", required=True)
    leaf = common_options(leaf=True)
    commands = Commands(subparsers, leaf)
    add_jobs(commands)
    add_executions(commands)
    add_apply(subparsers, leaf)
    add_runners(commands)
    add_secrets(commands)
    cli_mcp.add(subparsers, leaf)
    return parser


def settings(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, str]:
    """(server, key) from the arguments and the environment; Failed with
    EXIT_USAGE when either is missing or unusable."""
    server = args.server or environ.get("CRONIQ_SERVER", "")
    if not server:
        raise Failed(EXIT_USAGE, "no server: pass --server URL or set CRONIQ_SERVER")
    if not server.startswith(("http://", "https://")):
        raise Failed(EXIT_USAGE, f"server must be an http:// or https:// URL, got {server!r}")
    if args.api_key_file:
        try:
            with open(args.api_key_file) as handle:
                key = handle.read().strip()
        except OSError as error:
            raise Failed(
                EXIT_USAGE, f"--api-key-file: cannot read {args.api_key_file}: {error.strerror}"
            ) from None
        if not key:
            raise Failed(EXIT_USAGE, f"--api-key-file: {args.api_key_file} is empty")
        return server, key
    key = environ.get("CRONIQ_API_KEY", "").strip()
    if not key:
        raise Failed(EXIT_USAGE, "no API key: pass --api-key-file PATH or set CRONIQ_API_KEY")
    return server, key


def main(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    """Run one command; returns the exit code (argparse exits 2 itself)."""
    environ = os.environ if environ is None else environ
    out, err = out or sys.stdout, err or sys.stderr
    args = build_parser().parse_args(argv)
    args.stdin = sys.stdin if stdin is None else stdin  # what `secrets set` reads
    try:
        server, key = settings(args, environ)
        return args.run(Api(server, key), args, out, err)
    except Failed as failed:
        err.write(f"croniq: {failed}\n")
        return failed.code


def run() -> None:
    """The `croniq` console script."""
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        # `croniq executions list | head`: the reader has what it wanted.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_OK)
