"""`croniq mcp`'s tools against a scripted API: every call they make is one
the management API documents, a refusal is a tool error with the API's
detail, logs are answered bounded, and without the `mcp` package the command
says how to install it."""

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

import croniq_runner
from croniq_project.api import api as management_api
from croniq_runner.cli_api import Api
from croniq_runner.mcp_server import build
from tests.cli.test_cli_contract import body_fields, operation_of

PAGE = {"items": [], "next_cursor": None}
PENDING = {
    "id": 5,
    "job": "j",
    "state": "pending",
    "attempt": 1,
    "scheduled_for": "2026-12-01T00:00:00Z",
    "pinned_to": "",
}
MAINTENANCE = {"active": False, "on": False, "reason": "", "windows": []}
# (tool, its arguments, the scripted answers: (status, body) for each call).
CALLS = [
    ("list_jobs", {"label": "l", "name_prefix": "n", "enabled": True, "limit": 5, "cursor": "c"},
     [(200, PAGE)]),
    ("get_job", {"name": "j"}, [(200, {})]),
    ("next_fire_times", {"name": "j", "count": 3, "after": "2026-12-01T00:00:00Z"},
     [(200, {"instants": []})]),
    ("list_runs", {"job": "j", "state": "failed", "trigger": "manual", "since": "2026-12-01T00:00Z",
                   "until": "2026-12-02T00:00Z", "limit": 5, "cursor": "c"}, [(200, PAGE)]),
    ("get_run", {"run_id": 5}, [(200, {})]),
    ("get_run_log", {"run_id": 5}, [(200, {"data": "", "offset": 0, "complete": True})]),
    ("trigger_job", {"name": "j", "env": {"A": "1"}, "idempotency_key": "k"},
     [(202, {"execution_id": 5})]),
    ("pause_job", {"name": "j", "reason": "r", "until": "2026-12-01T00:00:00Z"}, [(200, {})]),
    ("resume_job", {"name": "j"}, [(200, {})]),
    ("backfill_dry_run", {"name": "j", "start": "2026-11-01T00:00Z", "end": "2026-11-02T00:00Z"},
     [(202, {"instants": [], "created": 0})]),
    ("why_pending", {"run_id": 5},
     [(200, PENDING), (200, {"labels": []}), (200, PAGE), (200, MAINTENANCE)]),
]  # fmt: skip


@pytest.fixture(scope="module")
def schema():
    return management_api.get_openapi_schema(path_prefix="/api/")


def call_tool(api, name, arguments):
    """The tool's CallToolResult, as a client connected in this process to a
    server over `api` receives it."""

    async def call():
        async with Client(build(Api(api.url, "crk_test", retry_delays=()))) as client:
            return await client.call_tool(name, arguments)

    return anyio.run(call)


def test_every_tool_is_covered_here():
    tools = anyio.run(build(Api("http://127.0.0.1:9", "k")).list_tools)

    assert sorted(tool.name for tool in tools) == sorted(name for name, _, _ in CALLS)


@pytest.mark.parametrize(("tool", "arguments", "answers"), CALLS, ids=[c[0] for c in CALLS])
def test_each_call_is_one_the_api_documents(api, schema, tool, arguments, answers):
    for status, body in answers:
        api.answer(status, body)

    result = call_tool(api, tool, arguments)

    assert not result.is_error, result.content
    assert len(api.asked) == len(answers)
    for asked in api.asked:
        operation = operation_of(schema, asked.method, asked.path)
        documented = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        assert set(asked.query) <= documented
        if asked.body:
            assert set(asked.json()) <= body_fields(schema, operation)


def test_the_tools_send_what_they_were_given(api):
    api.answer(200, PAGE).answer(202, {"execution_id": 5}).answer(202, {"instants": []})

    call_tool(api, "list_jobs", {"name_prefix": "nightly", "enabled": False})
    call_tool(api, "trigger_job", {"name": "a/b", "env": {"DAY": "2026-12-01"}})
    call_tool(api, "backfill_dry_run", {"name": "j", "start": "2026-11-01Z", "end": "2026-11-02Z"})

    listing, trigger, backfill = api.asked
    assert listing.query == {"name": "nightly", "enabled": "false", "limit": "50"}
    assert (trigger.path, trigger.json()) == (
        "/api/v1/jobs/a%2Fb/trigger",
        {"env": {"DAY": "2026-12-01"}},
    )
    assert backfill.json() == {"start": "2026-11-01Z", "end": "2026-11-02Z", "dry_run": True}


def test_a_refusal_is_a_tool_error_with_the_apis_detail(api):
    api.answer(404, {"detail": "no job named 'nope'"})

    result = call_tool(api, "get_job", {"name": "nope"})

    assert result.is_error
    assert result.content[0].text.endswith("HTTP 404: no job named 'nope'")


def test_a_missing_scope_is_named(api):
    api.answer(403, {"detail": "needs scope jobs:trigger"})

    result = call_tool(api, "trigger_job", {"name": "j"})

    assert result.is_error
    assert result.content[0].text.endswith(
        "HTTP 403: needs scope jobs:trigger (the API key croniq mcp runs with lacks the scope "
        "jobs:trigger)"
    )


def test_the_log_is_answered_as_its_last_kibibytes_cut_at_a_character(api):
    # 1023 bytes of "a", then "é" (2 bytes) straddling the last KiB's start.
    data = "x" * 5000 + "a" * 1023 + "é" + "z" * 1023
    api.answer(200, {"data": data, "offset": len(data.encode()), "complete": False})

    result = call_tool(api, "get_run_log", {"run_id": 5, "max_kib": 1})

    answer = result.structured_content
    assert answer["data"] == "z" * 1023
    assert answer["size"] == 5000 + 1023 + 2 + 1023
    assert answer["omitted_bytes"] == answer["size"] - 1024
    assert answer["complete"] is False
    assert json.loads(result.content[0].text) == answer


def test_the_log_is_never_answered_past_a_mebibyte(api):
    data = "y" * (1024 * 1024 + 10)
    api.answer(200, {"data": data, "offset": len(data), "complete": True})

    answer = call_tool(api, "get_run_log", {"run_id": 5, "max_kib": 4096}).structured_content

    assert (len(answer["data"]), answer["omitted_bytes"]) == (1024 * 1024, 10)


def test_why_pending_of_a_finished_run_reads_nothing_more(api):
    api.answer(200, PENDING | {"state": "succeeded"})

    answer = call_tool(api, "why_pending", {"run_id": 5}).structured_content

    assert answer["reason"] == "it is not pending: it ended succeeded"
    assert [a.path for a in api.asked] == ["/api/v1/executions/5"]


def test_without_the_mcp_package_the_command_exits_2_saying_how_to_install_it(
    croniq, api, monkeypatch
):
    # None entries make the imports fail as a missing package does.
    for name in [name for name in sys.modules if name.split(".")[0] in ("mcp", "mcp_types")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "croniq_runner.mcp_server", raising=False)
    monkeypatch.delattr(croniq_runner, "mcp_server", raising=False)

    code, out, err = croniq("mcp")

    assert (code, out) == (2, "")
    assert "pip install 'croniq-runner[mcp]'" in err
    assert not api.asked


def test_the_cli_loads_the_mcp_package_only_when_the_command_runs():
    """The agent and the other commands stay standard library and requests."""
    code = (
        "import sys, croniq_runner.cli, croniq_runner.agent; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'pydantic')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(croniq_runner.__file__).parents[1],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert result.stdout.strip() == "[]"
