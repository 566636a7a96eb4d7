"""The run's trace context on the agent (docs/design.md §15): the job's
TRACEPARENT is the assignment's, with no TRACESTATE; an http job's request
carries it as its traceparent header unless the job sends its own."""

import pytest

from croniq_runner.job import job_environment, traceparent_of
from tests.agent.test_http_job import finished, run, web  # noqa: F401 (the fixture)
from tests.agent.test_job import RecordingServer, run_job

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
# What the agent itself may have inherited (a traced shell that started it).
INHERITED = {
    "PATH": "/usr/bin:/bin",
    "TRACEPARENT": "00-11111111111111111111111111111111-2222222222222222-01",
    "TRACESTATE": "vendor=agent",
}


def assignment(**fields):
    return {"id": 42, "job": "report", "env": {}, "traceparent": TRACEPARENT, **fields}


def test_the_jobs_traceparent_is_the_assignments_with_no_tracestate():
    env = job_environment(assignment(), INHERITED)
    assert env["TRACEPARENT"] == TRACEPARENT
    assert "TRACESTATE" not in env
    assert env["PATH"] == "/usr/bin:/bin"


def test_a_job_that_sets_its_own_trace_context_keeps_it():
    own = {"TRACEPARENT": "00-33333333333333333333333333333333-4444444444444444-01"}
    env = job_environment(assignment(env=own), INHERITED)
    assert env["TRACEPARENT"] == own["TRACEPARENT"]


def test_from_an_older_server_the_job_environment_is_as_it_was():
    older = assignment()
    del older["traceparent"]
    assert job_environment(older, INHERITED)["TRACESTATE"] == "vendor=agent"
    assert job_environment(older, INHERITED)["TRACEPARENT"] == INHERITED["TRACEPARENT"]


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        42,
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\nX-Evil: 1",
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
    ],
)
def test_a_traceparent_that_is_not_one_is_ignored(value):
    assert traceparent_of(assignment(traceparent=value)) is None
    assert "TRACEPARENT" not in job_environment(assignment(traceparent=value), {})


def test_the_running_command_sees_the_assignments_traceparent(tmp_path, monkeypatch):
    for name, value in INHERITED.items():
        monkeypatch.setenv(name, value)
    server = RecordingServer()
    run_job(
        'echo "tp=$TRACEPARENT ts=${TRACESTATE-unset}"',
        server,
        tmp_path,
        traceparent=TRACEPARENT,
    )
    log = "".join(body["data"] for body in server.bodies("logs"))
    assert log == f"tp={TRACEPARENT} ts=unset\n"


def test_an_http_jobs_request_carries_the_traceparent_header(web):  # noqa: F811
    _, server = run({"url": f"{web.url}/ok", "headers": {"X-Token": "t"}}, traceparent=TRACEPARENT)
    assert finished(server)["exit_code"] == 0
    [(_, _, headers, _)] = web.seen
    assert headers["traceparent"] == TRACEPARENT
    assert "tracestate" not in {name.lower() for name in headers}


def test_an_http_job_that_sends_its_own_traceparent_keeps_it(web):  # noqa: F811
    own = "00-33333333333333333333333333333333-4444444444444444-01"
    request = {"url": f"{web.url}/ok", "headers": {"X-Token": "t", "TraceParent": own}}
    run(request, traceparent=TRACEPARENT)
    [(_, _, headers, _)] = web.seen
    assert [value for name, value in headers.items() if name.lower() == "traceparent"] == [own]
