"""Every call the `croniq` CLI makes is one the management API documents in
its OpenAPI schema (/api/openapi.json): the method and path, each query
parameter, each field of a JSON body, the body's media type."""

import re

import pytest

from croniq_project.api import api as management_api

PAGE = {"items": [], "next_cursor": None}
COMMANDS = [
    (["jobs", "list", "--project", "p", "--label", "l", "--name", "n", "--limit", "5"], PAGE),
    (["jobs", "show", "j"], {}),
    (
        [
            "jobs",
            "trigger",
            "j",
            "--idempotency-key",
            "k",
            "--env",
            "A=1",
            "--scheduled-for",
            "2026-12-01T00:00:00Z",
        ],
        {},
    ),  # fmt: skip
    (["jobs", "pause", "j", "--reason", "r", "--until", "2026-12-01T00:00:00Z"], {}),
    (["jobs", "resume", "j"], {}),
    (["jobs", "backfill", "j", "--start", "2026-11-01T00:00Z", "--end", "2026-11-02T00:00Z"], {}),
    (["jobs", "next", "j", "--count", "3", "--after", "2026-12-01T00:00:00Z"], {}),
    (["executions", "list", "--job", "j", "--state", "failed", "--limit", "5"], PAGE),
    (["executions", "show", "1"], {}),
    (["executions", "logs", "1"], {"data": "", "offset": 0, "complete": True}),
    (["executions", "cancel", "1"], {}),
    (["executions", "retry", "1"], {}),
    (["apply", "__file__", "--dry-run", "--prune"], {"changes": [], "applied": False}),
    (["runners", "list", "--state", "online", "--limit", "5"], PAGE),
    (["runners", "drain", "1"], {}),
    (["secrets", "set", "s", "--project", "p"], {"name": "s", "project": "p"}),
    (["secrets", "list", "--project", "p", "--limit", "5"], PAGE),
    (["secrets", "delete", "s", "--project", "p"], None),
]
# The verbs answered otherwise than 200.
STATUS = {"trigger": 202, "backfill": 202, "retry": 202, "set": 201, "delete": 204}


@pytest.fixture(scope="module")
def schema():
    return management_api.get_openapi_schema(path_prefix="/api/")


def operation_of(schema, method, path):
    for template, operations in schema["paths"].items():
        pattern = re.sub(r"\{[^}]+\}", "[^/]+", template)
        if re.fullmatch(pattern, path) and method.lower() in operations:
            return operations[method.lower()]
    raise AssertionError(f"{method} {path} is not in the OpenAPI schema")


def body_fields(schema, operation):
    content = operation["requestBody"]["content"]["application/json"]["schema"]
    ref = content.get("$ref") or next(
        option["$ref"] for option in content.get("anyOf", []) if "$ref" in option
    )
    return set(schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"])


@pytest.mark.parametrize(("argv", "answer"), COMMANDS, ids=[" ".join(c[0][:2]) for c in COMMANDS])
def test_each_call_is_one_the_api_documents(api, croniq, schema, tmp_path, argv, answer):
    if argv[0] == "secrets" and not any("/secrets" in path for path in schema["paths"]):
        # The server's side of secrets comes in a change of its own; once any
        # of its calls is in the schema, the CLI's must match them.
        pytest.skip("this server has no secrets API yet")
    (tmp_path / "croniq.yaml").write_text("jobs: []\n")
    argv = [str(tmp_path / "croniq.yaml") if arg == "__file__" else arg for arg in argv]
    api.answer(STATUS.get(argv[1], 200), answer)

    code, _, err = croniq("--json", *argv, stdin="a secret value")

    assert code == 0, err
    [asked] = api.asked
    operation = operation_of(schema, asked.method, asked.path)
    documented = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
    assert set(asked.query) <= documented
    if asked.body and asked.headers["Content-Type"] == "application/json":
        assert set(asked.json()) <= body_fields(schema, operation)
    elif asked.body:
        assert asked.headers["Content-Type"] in operation["requestBody"]["content"]
