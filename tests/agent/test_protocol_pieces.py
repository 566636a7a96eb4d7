import json
import signal

import pytest
import requests

from croniq_runner.client import (
    Conflict,
    NotFound,
    Rejected,
    Transient,
    Unauthorized,
    classify,
    describe_failure,
)
from croniq_runner.job import job_environment, outcome


def response(status, body=None, text=None):
    answer = requests.Response()
    answer.status_code = status
    answer._content = (json.dumps(body) if body is not None else text or "").encode()
    return answer


def test_a_2xx_answer_is_its_json():
    assert classify(response(200, {"executions": []})) == {"executions": []}


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, Unauthorized),
        (403, Unauthorized),
        (404, NotFound),
        (409, Conflict),
        (413, Rejected),
        (422, Rejected),
        (429, Transient),
        (500, Transient),
        (502, Transient),
        (503, Transient),
    ],
)
def test_errors_are_sorted_by_what_the_agent_does_about_them(status, kind):
    with pytest.raises(kind) as error:
        classify(response(status, {"detail": "why it failed"}))
    assert "why it failed" in str(error.value)
    assert error.value.status == status


def test_a_2xx_that_is_not_json_is_retried_not_trusted():
    with pytest.raises(Transient):
        classify(response(200, text="<html>proxy page</html>"))


def test_jobs_get_their_env_and_croniq_variables_but_never_the_runner_token():
    assignment = {
        "id": 42,
        "job": "nightly-report",
        "env": {"REPORT_DIR": "/srv", "LEVEL": 3},
        "scheduled_for": "2026-11-30T02:30:00Z",
        "attempt": 2,
    }
    base = {"PATH": "/usr/bin", "CRONIQ_TOKEN": "crq_secret", "REPORT_DIR": "/tmp"}
    env = job_environment(assignment, base)
    assert env["PATH"] == "/usr/bin"
    assert env["REPORT_DIR"] == "/srv"
    assert env["LEVEL"] == "3"
    assert env["CRONIQ_JOB"] == "nightly-report"
    assert env["CRONIQ_EXECUTION_ID"] == "42"
    assert env["CRONIQ_SCHEDULED_FOR"] == "2026-11-30T02:30:00Z"
    assert env["CRONIQ_ATTEMPT"] == "2"
    assert "CRONIQ_TOKEN" not in env


def test_the_run_learns_its_trigger_and_a_server_that_sends_none_sets_none():
    assignment = {"id": 42, "job": "deploy", "env": {}, "trigger": "webhook"}
    assert job_environment(assignment, {})["CRONIQ_TRIGGER"] == "webhook"
    older_server = {"id": 42, "job": "deploy", "env": {}}
    assert "CRONIQ_TRIGGER" not in job_environment(older_server, {})
    # The server's value wins over a job's env that names the variable.
    named = {**assignment, "env": {"CRONIQ_TRIGGER": "made-up"}}
    assert job_environment(named, {})["CRONIQ_TRIGGER"] == "webhook"


def test_a_normal_exit_reports_its_code():
    assert outcome(0) == {"exit_code": 0}
    assert outcome(3) == {"exit_code": 3}


def test_death_by_signal_reports_no_exit_code_and_names_the_signal():
    assert outcome(-signal.SIGKILL) == {"exit_code": None, "error": "terminated by SIGKILL"}


def test_a_timeout_is_flagged_and_explained():
    body = outcome(-signal.SIGTERM, "timeout", timeout=5)
    assert body == {
        "exit_code": None,
        "error": "timed out after 5s; terminated by SIGTERM",
        "timed_out": True,
    }


def test_a_fenced_job_says_why_it_was_killed():
    body = outcome(-signal.SIGTERM, "fenced")
    assert "lease could not be renewed" in body["error"]
    assert "timed_out" not in body


def test_a_command_that_could_not_start_is_reported_as_such():
    body = outcome(None, start_error="No such file or directory: '/gone'")
    assert body == {
        "exit_code": None,
        "error": "could not start: No such file or directory: '/gone'",
    }


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (requests.ConnectTimeout("x"), "timed out"),
        (requests.ReadTimeout("x"), "timed out"),
        (requests.ConnectionError("[Errno 111] Connection refused"), "connection refused"),
        (requests.ConnectionError("Connection reset by peer"), "connection reset"),
        (requests.ConnectionError("NameResolutionError: no such host"), "host name not found"),
        (requests.exceptions.SSLError("certificate verify failed"), "TLS error: certificate"),
        (requests.exceptions.ChunkedEncodingError("x"), "ChunkedEncodingError"),
    ],
)
def test_a_failed_call_is_described_in_a_few_words(error, reason):
    assert describe_failure(error).startswith(reason)
