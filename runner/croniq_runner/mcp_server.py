"""`croniq mcp`: the management API (docs/design.md §8) as an MCP server on
standard input and output, for AI assistants.

Each tool is one or a few calls of the API through the CLI's Api client
(cli_api): the same key, retries and answers. The key's scopes bound what
works; a refused call is a tool error (isError) carrying the API's detail,
and a 403 names the scope the key lacks. Runs are the API's executions.

Needs the `mcp` package (`pip install 'croniq-runner[mcp]'`): this module is
imported only by the `mcp` command (cli_mcp), so the agent and the rest of
the CLI stay standard library and requests.
"""

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from croniq_runner import __version__, pending
from croniq_runner.cli_api import Api, Failed
from croniq_runner.cli_commands import quoted

INSTRUCTIONS = """\
Croniq is a distributed job scheduler. Jobs (by name) fire on schedules; each
firing is a run (an execution, by id) that a runner machine carrying the job's
labels claims and runs. These tools call the Croniq management API with the
API key this server was started with: its scopes decide which tools work, and
a refused call says which scope is missing. Instants are ISO 8601 with an
offset (2026-12-01T08:00:00Z)."""

LOG_KIB = 64  # the log tail get_run_log answers by default
MAX_LOG_KIB = 1024
PAGE = 50  # the API's default page
MAX_PAGE = 500  # and its largest

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
CHANGE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
RUN = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)

Answer = dict[str, Any]
Tool = TypeVar("Tool", bound=Callable[..., Answer])

JobName = Annotated[str, Field(description="The job's name.", min_length=1)]
RunId = Annotated[int, Field(description="The run's (execution's) id.", ge=1)]
Limit = Annotated[int, Field(description="At most this many items.", ge=1, le=MAX_PAGE)]
Cursor = Annotated[
    str | None, Field(description="The next_cursor of the previous page, for the next one.")
]


def refusal(failed: Failed) -> str:
    """A failed call as a tool error's text: the API's answer, and for a
    403 which scope the key lacks."""
    text = str(failed)
    scope = text.partition("needs scope ")[2]
    if text.startswith("HTTP 403") and scope:
        return f"{text} (the API key croniq mcp runs with lacks the scope {scope})"
    return text


def refusals_as_tool_errors(tool: Tool) -> Tool:
    @functools.wraps(tool)
    def call(*args: Any, **kwargs: Any) -> Answer:
        try:
            return tool(*args, **kwargs)
        except Failed as failed:
            raise ToolError(refusal(failed)) from None

    return call  # type: ignore[return-value]  # the same signature, through functools.wraps


def log_tail(answer: Answer, run_id: int, max_kib: int) -> Answer:
    """The last `max_kib` KiB of a log the API answered whole (from offset
    0), cut at a character: an assistant reads a bounded answer."""
    data = answer["data"].encode("utf-8")
    kept = data[-max_kib * 1024 :]
    return {
        "run_id": run_id,
        "data": kept.decode("utf-8", "ignore"),
        "size": answer["offset"],
        "omitted_bytes": len(data) - len(kept),
        "complete": answer["complete"],
    }


def build(api: Api, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> MCPServer:
    """The server with its tools, each calling `api`."""
    # WARNING: the SDK's INFO lines (each request, each refusal) would fill
    # the assistant's log of this process's stderr.
    server = MCPServer(
        "croniq", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    def tool(annotations: ToolAnnotations) -> Callable[[Tool], Tool]:
        def add(fn: Tool) -> Tool:
            server.add_tool(refusals_as_tool_errors(fn), annotations=annotations)
            return fn

        return add

    @tool(READ)
    def list_jobs(
        label: Annotated[str | None, Field(description="Only jobs carrying this label.")] = None,
        name_prefix: Annotated[
            str | None, Field(description="Only jobs whose name starts so.")
        ] = None,
        enabled: Annotated[
            bool | None, Field(description="Only enabled (true) or disabled (false) jobs.")
        ] = None,
        limit: Limit = PAGE,
        cursor: Cursor = None,
    ) -> Answer:
        """List jobs by name, one page: {"items": [job], "next_cursor"}. Needs jobs:read."""
        flag = None if enabled is None else str(enabled).lower()
        return dict(
            api.get("jobs", label=label, name=name_prefix, enabled=flag, limit=limit, cursor=cursor)
        )

    @tool(READ)
    def get_job(name: JobName) -> Answer:
        """One job: its schedule, command, labels, pause, next run. Needs jobs:read."""
        return dict(api.get(f"jobs/{quoted(name)}"))

    @tool(READ)
    def next_fire_times(
        name: JobName,
        count: Annotated[int, Field(description="How many instants.", ge=1, le=100)] = 10,
        after: Annotated[
            str | None, Field(description="Strictly after this instant (default: now).")
        ] = None,
    ) -> Answer:
        """A job's next fire instants, calendar and policies applied: {"instants"}.
        Needs jobs:read."""
        return dict(api.get(f"jobs/{quoted(name)}/next", count=count, after=after))

    @tool(READ)
    def list_runs(
        job: Annotated[str | None, Field(description="Only this job's runs.")] = None,
        state: Annotated[
            str | None,
            Field(
                description="Only runs in this state: queued, pending, running, succeeded, "
                "failed, timed_out, lost, cancelled, skipped."
            ),
        ] = None,
        trigger: Annotated[
            str | None,
            Field(
                description="Only runs started so: schedule, manual, retry, catch_up, backfill, "
                "replay, chain, register, webhook."
            ),
        ] = None,
        since: Annotated[
            str | None, Field(description="Only runs scheduled at or after this instant.")
        ] = None,
        until: Annotated[
            str | None, Field(description="Only runs scheduled before this instant.")
        ] = None,
        limit: Limit = PAGE,
        cursor: Cursor = None,
    ) -> Answer:
        """Runs (executions), newest first, one page: {"items": [run], "next_cursor"}.
        Needs executions:read."""
        filters = dict(job=job, state=state, trigger=trigger, since=since, until=until)
        return dict(api.get("executions", **filters, limit=limit, cursor=cursor))

    @tool(READ)
    def get_run(run_id: RunId) -> Answer:
        """One run (execution): its job, state, runner, times, exit code, error.
        Needs executions:read."""
        return dict(api.get(f"executions/{run_id}"))

    @tool(READ)
    def get_run_log(
        run_id: RunId,
        max_kib: Annotated[
            int, Field(description="Answer at most the log's last this many KiB.", ge=1)
        ] = LOG_KIB,
    ) -> Answer:
        """A run's output, its last max_kib KiB (at most 1024): {"data", "size" (bytes),
        "omitted_bytes" (left out before data), "complete" (the run ended)}.
        Needs executions:read."""
        answer = api.get(f"executions/{run_id}/log")
        return log_tail(answer, run_id, min(max_kib, MAX_LOG_KIB))

    @tool(RUN)
    def trigger_job(
        name: JobName,
        env: Annotated[
            dict[str, str] | None,
            Field(description="Values for the parameters the job declares, by name."),
        ] = None,
        idempotency_key: Annotated[
            str | None,
            Field(description="A trigger repeated with the same key within 24 h runs once."),
        ] = None,
    ) -> Answer:
        """Run a job now: {"execution_id", "deduplicated", "execution_ids"}.
        Needs jobs:trigger."""
        body: Answer = {}
        if env is not None:
            body["env"] = env
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        return dict(api.post(f"jobs/{quoted(name)}/trigger", body))

    @tool(CHANGE)
    def pause_job(
        name: JobName,
        reason: Annotated[str, Field(description="Why, shown to operators.")] = "",
        until: Annotated[str | None, Field(description="Resume by itself at this instant.")] = None,
    ) -> Answer:
        """Stop a job from firing until resumed (or until `until`): the job.
        Needs jobs:write."""
        body: Answer = {"reason": reason}
        if until is not None:
            body["until"] = until
        return dict(api.post(f"jobs/{quoted(name)}/pause", body))

    @tool(CHANGE)
    def resume_job(name: JobName) -> Answer:
        """Let a paused job fire again: the job, with its next run. Needs jobs:write."""
        return dict(api.post(f"jobs/{quoted(name)}/resume"))

    @tool(READ)
    def backfill_dry_run(
        name: JobName,
        start: Annotated[str, Field(description="From this instant (included), ISO 8601.")],
        end: Annotated[str, Field(description="To this instant (excluded), ISO 8601.")],
    ) -> Answer:
        """The past instants of a job's schedule in [start, end) that a backfill would run,
        creating nothing: {"instants", "created": 0}. Needs jobs:trigger."""
        body = {"start": start, "end": end, "dry_run": True}
        return dict(api.post(f"jobs/{quoted(name)}/backfill", body))

    @tool(READ)
    def why_pending(run_id: RunId) -> Answer:
        """Why a run has not started: {"kind", "reason", "also", "uncertain"}, derived from
        the run, its job, the runners and maintenance. kind: not_pending, queued, no_runner,
        unavailable, maintenance, not_yet, busy, free. Needs executions:read, jobs:read and
        runners:read."""
        execution = api.get(f"executions/{run_id}")
        job, runners, maintenance = {}, [], {}
        # Only what the run's state needs is read: a run that is no longer
        # waiting is told without the other scopes.
        if execution["state"] in ("pending", "queued"):
            job = api.get(f"jobs/{quoted(execution['job'])}")
        if execution["state"] == "pending":
            runners = api.pages("runners")["items"]
            maintenance = api.get("maintenance")
        return pending.why_pending(execution, job, runners, maintenance, now=clock())

    return server


def serve(api: Api) -> int:
    """Serve the tools on standard input and output until the client closes them."""
    build(api).run("stdio")
    return 0
