"""What each `croniq` command does: one or two calls of the management API
(docs/design.md §8), and what it prints. Each command takes the Api, the parsed
arguments and the output and error streams, and returns the exit code;
a call that fails raises cli_api.Failed with the exit code it means."""

import argparse
import getpass
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TextIO
from urllib.parse import quote

from croniq_runner import cli_tables
from croniq_runner.cli_api import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, Api, Failed

FOLLOW_INTERVAL = 0.5  # seconds between reads of a running execution's log


def quoted(name: str) -> str:
    """A name as one path segment: "/" and "?" in a name stay in it."""
    return quote(name, safe="")


def show(args: argparse.Namespace, out: TextIO, answer: Any, text: Callable[[Any], str]) -> int:
    """The API's JSON with --json, else `text(answer)`."""
    if args.json:
        out.write(json.dumps(answer, indent=2) + "\n")
    else:
        out.write(text(answer) + "\n")
    return EXIT_OK


def listed(
    args: argparse.Namespace,
    out: TextIO,
    answer: Any,
    columns: list[cli_tables.Column],
    noun: str,
) -> int:
    def text(page: Any) -> str:
        if not page["items"]:
            return f"no {noun}"
        return cli_tables.table(page["items"], columns)

    return show(args, out, answer, text)


# -- jobs --------------------------------------------------------------------


def jobs_list(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    answer = api.pages("jobs", args.limit, project=args.project, label=args.label, name=args.name)
    return listed(args, out, answer, cli_tables.JOB_COLUMNS, "jobs")


def jobs_show(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return show(args, out, api.get(f"jobs/{quoted(args.name)}"), cli_tables.fields)


def jobs_trigger(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    body: dict[str, Any] = {}
    if args.idempotency_key is not None:
        body["idempotency_key"] = args.idempotency_key
    if args.env:
        body["env"] = dict(args.env)
    if args.scheduled_for is not None:
        body["scheduled_for"] = args.scheduled_for
    answer = api.post(f"jobs/{quoted(args.name)}/trigger", body)

    def text(done: Any) -> str:
        if done["deduplicated"]:
            return f"execution {done['execution_id']} (triggered before with this key)"
        return f"execution {done['execution_id']} triggered"

    return show(args, out, answer, text)


def jobs_pause(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    body = {"reason": args.reason or ""}
    if args.until is not None:
        body["until"] = args.until
    answer = api.post(f"jobs/{quoted(args.name)}/pause", body)
    return show(args, out, answer, lambda job: f"job {job['name']}: {cli_tables.job_status(job)}")


def jobs_resume(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    answer = api.post(f"jobs/{quoted(args.name)}/resume")

    def text(job: Any) -> str:
        following = cli_tables.when(job.get("next_run_at")) or "none"
        return f"job {job['name']}: resumed, next run {following}"

    return show(args, out, answer, text)


def jobs_backfill(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    body = {"start": args.start, "end": args.end, "dry_run": args.dry_run}
    answer = api.post(f"jobs/{quoted(args.name)}/backfill", body)

    def text(done: Any) -> str:
        lines = list(done["instants"])
        if args.dry_run:
            lines.append(f"would create {len(done['instants'])} execution(s)")
        else:
            lines.append(f"created {done['created']} execution(s)")
        return "\n".join(lines)

    return show(args, out, answer, text)


def jobs_next(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    answer = api.get(f"jobs/{quoted(args.name)}/next", count=args.count, after=args.after)
    return show(args, out, answer, lambda a: "\n".join(a["instants"]) or "never fires")


# -- executions --------------------------------------------------------------


def executions_list(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    answer = api.pages("executions", args.limit, job=args.job, state=args.state)
    return listed(args, out, answer, cli_tables.EXECUTION_COLUMNS, "executions")


def executions_show(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return show(args, out, api.get(f"executions/{args.id}"), cli_tables.fields)


def executions_logs(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.follow:
        return follow(api, args.id, out, err)
    answer = api.get(f"executions/{args.id}/log")
    if args.json:
        return show(args, out, answer, str)
    out.write(answer["data"])
    out.flush()
    return EXIT_OK


def follow(
    api: Api,
    execution_id: int,
    out: TextIO,
    err: TextIO,
    sleep: Callable[[float], None] = time.sleep,
    interval: float = FOLLOW_INTERVAL,
) -> int:
    """Print the log as it grows until the execution ends; the exit code is
    the job's (job_exit)."""
    offset = 0
    while True:
        part = api.get(f"executions/{execution_id}/log", offset=offset)
        out.write(part["data"])
        out.flush()
        offset = part["offset"]
        # A finished run's log is whole, but the read that said so may have
        # come before its last chunk: read once more until nothing is new.
        if part["data"]:
            continue
        if part["complete"]:
            return job_exit(api.get(f"executions/{execution_id}"), err)
        sleep(interval)


def job_exit(execution: dict[str, Any], err: TextIO) -> int:
    """The job's exit code; 1 when it has none (lost, timed out, cancelled,
    killed by a signal, never started) or one a process cannot exit with."""
    code = execution.get("exit_code")
    if code is None:
        err.write(f"croniq: execution {execution['id']} ended {execution['state']} "
                  "without an exit code\n")  # fmt: skip
        return EXIT_REFUSED
    return code if 0 <= code <= 255 else EXIT_REFUSED


def executions_cancel(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    answer = api.post(f"executions/{args.id}/cancel")

    def text(execution: Any) -> str:
        if execution["state"] == "running":
            return f"execution {execution['id']}: cancel requested, the runner stops it"
        return f"execution {execution['id']}: {execution['state']}"

    return show(args, out, answer, text)


def executions_retry(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    answer = api.post(f"executions/{args.id}/retry")

    def text(new: Any) -> str:
        attempt = f"attempt {new['attempt']} of job {new['job']}"
        return f"execution {new['id']}: {attempt}, {new['state']}"

    return show(args, out, answer, text)


# -- apply -------------------------------------------------------------------


def apply_file(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        with open(args.file, "rb") as handle:
            document = handle.read()
    except OSError as error:
        raise Failed(EXIT_USAGE, f"cannot read {args.file}: {error.strerror}") from None
    # Sent as it is; the server reads it as `manage.py apply` reads a file.
    syntax = "application/json" if args.file.endswith(".json") else "application/yaml"
    params = {
        "dry_run": "true" if args.dry_run else None,
        "prune": "true" if args.prune else None,
        # The name `manage.py apply` gives the same file: both manage the same rows.
        "source": Path(args.file).stem if args.source is None else args.source,
    }
    answer = api.call(
        "POST",
        "apply",
        data=document,
        content_type=syntax,
        params={k: v for k, v in params.items() if v is not None},
    )
    # On stderr, as `manage.py apply` prints them: stdout stays the plan.
    for warning in answer.get("warnings") or []:
        err.write(f"warning: {warning}\n")
    return show(args, out, answer, cli_tables.plan)


# -- runners -----------------------------------------------------------------


def runners_list(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    answer = api.pages("runners", args.limit, state=args.state)
    return listed(args, out, answer, cli_tables.RUNNER_COLUMNS, "runners")


def runners_drain(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    answer = api.post(f"runners/{args.id}/drain")

    def text(runner: Any) -> str:
        return f"runner {runner['name']} ({runner['id']}): drained, it takes no new work"

    return show(args, out, answer, text)


# -- secrets -----------------------------------------------------------------


def secret_value(name: str, stdin: IO[str]) -> str:
    """The value to store: typed at a terminal without echo, else read from
    standard input to its end, one trailing newline dropped (`echo`'s,
    a file's last line). Failed when it is empty: nothing is sent."""
    try:
        if stdin.isatty():
            value = getpass.getpass(f"value of secret {name}: ")
        else:
            value = stdin.read()
            value = value[:-1] if value.endswith("\n") else value
    except EOFError:  # Ctrl-D at the prompt
        value = ""
    except UnicodeDecodeError:
        raise Failed(
            EXIT_USAGE, f"secrets set {name}: the value on standard input is not UTF-8 text"
        ) from None
    if not value:
        raise Failed(
            EXIT_USAGE,
            f"secrets set {name}: the value is empty; give it on standard input "
            "(`croniq secrets set NAME < file`) or type it at the prompt",
        )
    return value


def secrets_set(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    body = {"name": args.name, "value": secret_value(args.name, args.stdin)}
    if args.project is not None:
        body["project"] = args.project
    status, answer = api.exchange("POST", "secrets", body=body)

    def text(secret: Any) -> str:
        where = f" (project {secret['project']})" if secret.get("project") else ""
        done = "created" if status == 201 else "value replaced"
        return f"secret {secret['name']}{where}: {done}"

    return show(args, out, answer, text)


def secrets_list(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    answer = api.pages("secrets", args.limit, project=args.project)
    return listed(args, out, answer, cli_tables.SECRET_COLUMNS, "secrets")


def secrets_delete(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    api.delete(f"secrets/{quoted(args.name)}", project=args.project)
    if not args.json:  # the API answers 204, no body: the exit code says it
        out.write(f"secret {args.name}: deleted\n")
    return EXIT_OK
