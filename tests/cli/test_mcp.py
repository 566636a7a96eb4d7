"""`croniq mcp` as an assistant runs it: a subprocess speaking MCP on its
standard input and output, driven by the `mcp` package's own client
(stdio_client + ClientSession), against a real Croniq server (uvicorn on a
database of its own, harness/processes.py).

The tests of this module share the server, its jobs and one session per
API key; each works on jobs of its own.
"""

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client

import croniq_runner
from harness.processes import Server, drop_database, manage, migrated_database
from tests.agent.world import ready
from tests.e2e.protocol_client import RunnerClient, token

pytestmark = pytest.mark.e2e

APPLY_FILE = """\
jobs:
  - name: report
    schedule: "0 3 * * *"
    command: echo report
    labels: [mcp]
  - name: nightly
    schedule: "30 2 * * *"
    command: echo nightly
    labels: [mcp]
  - name: greet
    schedule: "0 0 1 1 *"
    command: echo hello
    labels: [logs]
  - name: train
    schedule: "0 0 1 1 *"
    command: train --epochs 3
    labels: [gpu]
"""
TOOLS = {
    "list_jobs", "get_job", "next_fire_times", "list_runs", "get_run", "get_run_log",
    "trigger_job", "pause_job", "resume_job", "backfill_dry_run", "why_pending",
}  # fmt: skip
# The runner package under test (this checkout's), for the subprocess.
RUNNER_PATH = str(Path(croniq_runner.__file__).resolve().parents[1])


def api_key(db: str, name: str, *scopes: str) -> str:
    return manage(db, "create_api_key", name, "--scopes", *scopes).stdout.strip()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mcp-world")
    db = migrated_database(tmp)
    try:
        server = Server(db, tmp / "web.log")
        try:
            # While the server boots.
            (tmp / "croniq.yaml").write_text(APPLY_FILE)
            manage(db, "apply", str(tmp / "croniq.yaml"))
            operator = api_key(
                db, "mcp-operator", "jobs:read", "jobs:write", "jobs:trigger",
                "executions:read", "runners:read",
            )  # fmt: skip
            reader = api_key(db, "mcp-reader", "jobs:read", "executions:read")
            runner_token = token(db)
            ready(server)
            yield SimpleNamespace(
                server=server, operator=operator, reader=reader, token=runner_token, tmp=tmp
            )
        finally:
            server.stop()
    finally:
        drop_database(db)


class Session:
    """An MCP client session on a `croniq mcp` subprocess, called from the
    test's thread (the session lives in a blocking portal's event loop)."""

    def __init__(self, portal, session: ClientSession) -> None:
        self.portal = portal
        self.session = session

    def tools(self) -> set[str]:
        return {tool.name for tool in self.portal.call(self.session.list_tools).tools}

    def call(self, tool: str, /, **arguments):
        """The tool's CallToolResult."""
        return self.portal.call(self.session.call_tool, tool, arguments)

    def answer(self, tool: str, /, **arguments) -> dict:
        """The structured answer of a call that must succeed."""
        result = self.call(tool, **arguments)
        assert not result.is_error, result.content
        return result.structured_content


@asynccontextmanager
async def connected(params: StdioServerParameters, errlog) -> AsyncIterator[ClientSession]:
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@contextmanager
def croniq_mcp(server_url: str, key: str, errlog_path: Path) -> Iterator[Session]:
    """`croniq mcp` started as an assistant starts it: the command, and the
    server and key in its environment."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from croniq_runner.cli import run; run()", "mcp"],
        env={"CRONIQ_SERVER": server_url, "CRONIQ_API_KEY": key, "PYTHONPATH": RUNNER_PATH},
    )
    with (
        open(errlog_path, "w") as errlog,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(params, errlog)) as session,
    ):
        yield Session(portal, session)


@pytest.fixture(scope="module")
def operator(world):
    with croniq_mcp(world.server.url, world.operator, world.tmp / "mcp-operator.log") as session:
        yield session


@pytest.fixture(scope="module")
def reader(world):
    with croniq_mcp(world.server.url, world.reader, world.tmp / "mcp-reader.log") as session:
        yield session


def test_it_offers_its_tools(operator):
    assert operator.tools() == TOOLS


def test_list_jobs_returns_the_jobs(operator):
    everything = operator.answer("list_jobs")
    labelled = operator.answer("list_jobs", label="mcp", limit=1)

    assert [job["name"] for job in everything["items"]] == ["greet", "nightly", "report", "train"]
    assert everything["next_cursor"] is None
    assert [job["name"] for job in labelled["items"]] == ["nightly"]
    assert labelled["next_cursor"]


def test_a_job_and_its_next_fire_times_are_read(operator):
    job = operator.answer("get_job", name="report")
    upcoming = operator.answer(
        "next_fire_times", name="report", count=2, after="2026-12-01T00:00:00Z"
    )

    assert (job["schedule"], job["labels"]) == ("0 3 * * *", ["mcp"])
    assert upcoming["instants"] == ["2026-12-01T03:00:00+00:00", "2026-12-02T03:00:00+00:00"]


def test_trigger_job_creates_a_pending_run(operator):
    done = operator.answer("trigger_job", name="report", idempotency_key="mcp-1")
    again = operator.answer("trigger_job", name="report", idempotency_key="mcp-1")

    run = operator.answer("get_run", run_id=done["execution_id"])
    listed = operator.answer("list_runs", job="report", state="pending")
    assert (run["job"], run["state"], run["trigger"]) == ("report", "pending", "manual")
    assert (again["execution_id"], again["deduplicated"]) == (done["execution_id"], True)
    assert [r["id"] for r in listed["items"]] == [done["execution_id"]]


def test_pause_and_resume(operator):
    paused = operator.answer("pause_job", name="nightly", reason="upstream outage")
    shown = operator.answer("get_job", name="nightly")
    resumed = operator.answer("resume_job", name="nightly")

    assert (paused["paused"], paused["pause_reason"]) == (True, "upstream outage")
    assert shown["paused"] is True
    assert (resumed["paused"], resumed["pause_reason"]) == (False, "")
    assert resumed["next_run_at"]


def test_a_key_lacking_a_scope_gets_a_tool_error_naming_it(reader):
    refused = reader.call("trigger_job", name="nightly")

    assert refused.is_error
    assert "HTTP 403: needs scope jobs:trigger" in refused.content[0].text
    assert "lacks the scope jobs:trigger" in refused.content[0].text
    # What its scopes allow works; the refusal created nothing.
    assert reader.answer("list_runs", job="nightly")["items"] == []


def test_a_refused_call_is_a_tool_error_with_the_apis_detail(operator):
    missing = operator.call("get_run", run_id=999999)

    assert missing.is_error
    assert "HTTP 404: no execution 999999" in missing.content[0].text


def test_get_run_log_answers_the_logs_last_kibibytes(world, operator):
    run_id = operator.answer("trigger_job", name="greet")["execution_id"]
    runner = RunnerClient(world.server.url, world.token, labels=["logs"])
    assert runner.register().status_code == 200
    [claimed] = runner.claim()
    lines = "".join(f"line {n:04d}\n" for n in range(300))  # 3000 bytes
    assert runner.logs(run_id, claimed["lease"], 0, lines).status_code == 200
    assert runner.finish(run_id, claimed["lease"], exit_code=0).status_code == 200

    log = operator.answer("get_run_log", run_id=run_id, max_kib=1)

    assert claimed["id"] == run_id
    assert (log["size"], log["omitted_bytes"], log["complete"]) == (3000, 3000 - 1024, True)
    assert log["data"] == lines[-1024:]
    assert log["data"].endswith("line 0299\n")


def test_backfill_dry_run_creates_nothing(operator):
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = today - timedelta(days=3), today

    planned = operator.answer(
        "backfill_dry_run", name="report", start=start.isoformat(), end=end.isoformat()
    )

    days = [start + timedelta(days=n, hours=3) for n in range(3)]
    assert [datetime.fromisoformat(i) for i in planned["instants"]] == days
    assert planned["created"] == 0
    assert operator.answer("list_runs", job="report", trigger="backfill")["items"] == []


def test_why_pending_explains_a_run_no_runner_can_take(operator):
    run_id = operator.answer("trigger_job", name="train")["execution_id"]

    why = operator.answer("why_pending", run_id=run_id)

    assert (why["run"], why["state"], why["kind"]) == (run_id, "pending", "no_runner")
    assert why["reason"].startswith("no runner with labels gpu has been seen; ")
    assert "derived by croniq mcp" in why["derived"]
