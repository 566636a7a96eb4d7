"""An http job on the agent (docs/design.md §15), against a real HTTP server
on this machine: the log holds the answer's status line, headers and body
(cut after 1 MiB, the cut said), masked as a command's output is; the run
succeeds on an expected status, fails on another or without an answer,
and a timeout, a cancel or self-fencing abandon the request at once."""

import http.server
import socket
import threading
import time

import pytest

from croniq_runner.agent import Agent
from croniq_runner.config import Config
from croniq_runner.http_job import HttpJob, Request, RequestError
from croniq_runner.job import FEATURES
from croniq_runner.timing import LeaseBook
from tests.agent.test_job import RecordingServer, run_job

SECRET = "s3cr3t-token-value"
HANG = 20  # seconds /hang holds a request before it lets go


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass  # the test's output stays the test's

    def do_GET(self):
        self.server.seen.append((self.command, self.path, dict(self.headers), b""))
        route = getattr(self, "route_" + self.path.strip("/").split("?")[0], None)
        if route is None:
            self.answer(404, b"no such route\n")
        else:
            route()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append((self.command, self.path, dict(self.headers), body))
        self.answer(201, b"made: " + body)

    def answer(self, status, body, **headers):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def route_ok(self):
        self.answer(200, b"all fine\n", Content_Type="text/plain", X_Seen=self.headers["X-Token"])

    def route_unavailable(self):
        self.answer(503, b"come back later\n")

    def route_moved(self):
        self.answer(302, b"", Location="/ok")

    def route_huge(self):
        self.answer(200, b"x" * (1024 * 1024 + 1000))

    def route_big(self):
        self.answer(200, b"h" * 10_000 + b"t" * 10_000)

    def route_hang(self):
        """Answers nothing; notes when the client hangs up."""
        self.server.hanging.set()
        self.connection.settimeout(HANG)
        try:
            gone = self.rfile.read(1) == b""
        except OSError:
            gone = True
        if gone:
            self.server.hung_up.set()


@pytest.fixture
def web():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.seen, server.hanging, server.hung_up = [], threading.Event(), threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()
    server.server_close()


def start(request, timeout=None, **assignment):
    done = threading.Event()
    job = HttpJob(
        {
            "id": 9,
            "lease": 4,
            "command": "",
            "job": "ping",
            "attempt": 1,
            "kind": "http",
            "http": request,
            "timeout": timeout,
            **assignment,
        },
        client=(server := RecordingServer()),
        session="s1",
        work_dir="/nonexistent",
        on_done=lambda job: done.set(),
        on_unauthorized=lambda error: None,
        giving_up=threading.Event(),
    )
    job.start()
    return job, server, done


def run(request, wait=10, **assignment):
    job, server, done = start(request, **assignment)
    assert done.wait(wait), "the run did not end"
    return job, server


def logged(server):
    return "".join(body["data"] for body in server.bodies("logs"))


def finished(server):
    [finish] = server.bodies("finish")
    return finish


def test_the_agent_announces_http():
    assert "http" in FEATURES
    config = Config(server="http://croniq.test", token="t", name="n")
    assert Agent(config).registration()["features"] == ["stdin", "http", "limits"]


def test_an_expected_status_succeeds_and_the_log_holds_the_answer(web):
    _, server = run({"url": f"{web.url}/ok", "headers": {"X-Token": "plain"}})
    assert finished(server) == {"session": "s1", "lease": 4, "exit_code": 0}
    log = logged(server)
    assert log.startswith("HTTP/1.1 200 OK\n")
    assert "Content-Type: text/plain\n" in log
    assert "X-Seen: plain\n" in log
    assert log.endswith("\n\nall fine\n")
    [(method, path, headers, _)] = web.seen
    assert (method, path) == ("GET", "/ok")
    assert headers["User-Agent"].startswith("croniq-runner/")


def test_the_method_headers_and_body_are_sent_as_given(web):
    request = {
        "method": "POST",
        "url": f"{web.url}/make?x=1",
        "headers": {"Content-Type": "application/json", "User-Agent": "mine"},
        "body": '{"name": "é"}',
        "expect_status": [201],
    }
    _, server = run(request)
    assert finished(server)["exit_code"] == 0
    [(method, path, headers, body)] = web.seen
    assert (method, path, body) == ("POST", "/make?x=1", '{"name": "é"}'.encode())
    assert (headers["Content-Type"], headers["User-Agent"]) == ("application/json", "mine")
    assert logged(server).endswith('made: {"name": "é"}')


def test_an_unexpected_status_fails_the_run_with_it(web):
    _, server = run({"url": f"{web.url}/unavailable"})
    assert finished(server) == {"session": "s1", "lease": 4, "exit_code": None, "error": "HTTP 503"}
    assert logged(server).startswith("HTTP/1.1 503 Service Unavailable\n")
    assert logged(server).endswith("come back later\n")


def test_a_listed_status_is_the_only_success(web):
    _, server = run({"url": f"{web.url}/ok", "expect_status": [204]})
    assert finished(server)["error"] == "HTTP 200"
    _, server = run({"url": f"{web.url}/unavailable", "expect_status": [503]})
    assert finished(server)["exit_code"] == 0


def test_a_redirect_is_the_answer_not_followed(web):
    _, server = run({"url": f"{web.url}/moved", "headers": {"X-Token": "t"}})
    assert finished(server)["error"] == "HTTP 302"
    assert "Location: /ok\n" in logged(server)
    assert [path for _, path, _, _ in web.seen] == ["/moved"]


def test_a_refused_connection_fails_the_run_saying_so():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    _, server = run({"url": f"http://127.0.0.1:{port}/x"})
    assert finished(server)["error"] == f"connection refused: 127.0.0.1:{port}"
    assert finished(server)["exit_code"] is None


def test_an_answer_past_max_output_keeps_its_head_and_tail_and_says_what_was_cut(web):
    _, server = run({"url": f"{web.url}/big"}, max_output=4096)
    assert finished(server)["exit_code"] == 0
    log = logged(server)
    assert len(log.encode()) <= 4096
    head, tail = log.split("\n[croniq-runner: ", 1)
    assert head.startswith("HTTP/1.1 200 OK\n") and head.endswith("h")
    cut, tail = tail.split(" bytes of output cut here (max_output 4 KiB)]\n")
    assert tail == "t" * len(tail) and len(tail) >= 1900
    # All of it is there but what the line says was cut.
    assert len(head.split("\n\n", 1)[1]) + int(cut) + len(tail) == 20_000


def test_without_max_output_the_log_keeps_one_mebibyte(web):
    # A server that predates limits sends none: the agent's default, as before.
    _, server = run({"url": f"{web.url}/huge"})
    assert finished(server)["exit_code"] == 0
    log = logged(server)
    assert 1024 * 1024 - 200 < len(log.encode()) <= 1024 * 1024
    assert " bytes of output cut here (max_output 1 MiB)]\n" in log
    assert log.endswith("x" * 1000)


def test_an_answer_past_max_output_with_on_max_output_fail_fails_the_run(web):
    job, server = run({"url": f"{web.url}/big"}, max_output=4096, on_max_output="fail")
    assert finished(server)["exit_code"] is None
    assert finished(server)["error"] == "output limit 4 KiB exceeded"
    assert len(logged(server).encode()) <= 4096


def test_a_malformed_limit_fails_the_run_unstarted(web):
    _, server = run({"url": f"{web.url}/ok"}, max_output="lots")
    error = "could not start: max_output: 'lots' is not a number of bytes"
    assert finished(server)["error"] == error
    assert web.seen == []


def test_a_secret_in_a_header_is_masked_in_the_log(web):
    request = {"url": f"{web.url}/ok", "headers": {"X-Token": f"Bearer {SECRET}"}}
    _, server = run(request, redact=[SECRET])
    log = logged(server)
    assert SECRET not in log
    assert "X-Seen: Bearer ***\n" in log
    # Sent as it is: only the log is masked.
    assert web.seen[0][2]["X-Token"] == f"Bearer {SECRET}"


def test_the_jobs_timeout_abandons_a_request_that_gets_no_answer(web):
    # /hang holds the request for 20 s: only the job's timeout ends the run
    # as timed out, and not before its second.
    started = time.monotonic()
    job, server = run({"url": f"{web.url}/hang"}, timeout=1, wait=HANG / 2)
    assert time.monotonic() - started >= 1
    assert finished(server) == {
        "session": "s1",
        "lease": 4,
        "exit_code": None,
        "error": "timed out after 1s",
        "timed_out": True,
    }
    assert web.hung_up.wait(5), "the connection was left open"


def test_the_requests_own_timeout_ends_it_before_the_jobs(web):
    job, server = run({"url": f"{web.url}/hang", "timeout": 1}, timeout=60)
    assert finished(server)["error"] == "timed out after 1s"
    assert finished(server)["timed_out"] is True


def test_a_cancel_abandons_the_request_at_once(web):
    job, server, done = start({"url": f"{web.url}/hang"})
    assert web.hanging.wait(5)
    # No grace to wait out (nothing to signal): the run ends long before
    # the grace, and before /hang would let the request go (20 s).
    assert job.kill("cancel", grace=60)
    assert done.wait(HANG / 2)
    assert finished(server) == {
        "session": "s1",
        "lease": 4,
        "exit_code": None,
        "error": "cancelled on the server's request",
    }
    assert web.hung_up.wait(5), "the connection was left open"
    assert not job.kill("cancel", grace=10)  # ended: nothing more to do


def test_self_fencing_abandons_the_request_and_reports_once_the_lease_lapsed(web):
    job, server, done = start({"url": f"{web.url}/hang"})
    assert web.hanging.wait(5)
    report_after = time.monotonic() + 1.0
    assert job.give_up_lease(grace=0.2, report_after=report_after)
    assert not job.holds_lease
    assert web.hung_up.wait(5)
    assert done.wait(5)
    assert time.monotonic() >= report_after
    assert "lease could not be renewed" in finished(server)["error"]


def test_the_watchdogs_tick_times_it_out_too(web):
    job, server, done = start({"url": f"{web.url}/hang"}, timeout=30)
    assert web.hanging.wait(5)
    job.tick(job.started_at + 30, kill_grace=10)
    assert done.wait(5)
    assert finished(server)["timed_out"] is True


@pytest.mark.parametrize(
    ("given", "error"),
    [
        (None, "http: no request in the assignment"),
        ({}, "http.url: missing"),
        ({"url": "file:///etc/passwd"}, "http.url: not an http:// or https:// URL with a host"),
        ({"url": "http://x:port/"}, "http.url: its port is not a number"),
        ({"url": "http://x", "method": "BREW"}, "http.method: 'BREW' is not one of GET"),
        ({"url": "http://x", "headers": {"X-A": "one\ntwo"}}, "http.headers.X-A: a header's"),
        ({"url": "http://x", "expect_status": "2xx"}, "http.expect_status: not a list"),
        ({"url": "http://x", "timeout": -1}, "http.timeout: not a number of seconds"),
    ],
)
def test_a_request_the_agent_cannot_send_fails_unstarted_naming_the_field(given, error):
    _, server = run(given)
    assert finished(server)["exit_code"] is None
    assert finished(server)["error"].startswith(f"could not start: {error}")
    assert server.bodies("logs") == []


@pytest.mark.parametrize("value", [f"Bearer {SECRET}\n", f" {SECRET}"])
def test_the_error_never_quotes_a_header_value(value):
    with pytest.raises(RequestError) as refused:
        Request.of({"url": "http://x", "headers": {"Authorization": value}})
    assert SECRET not in str(refused.value)
    assert str(refused.value).startswith("http.headers.Authorization: a header's value")


def test_a_shell_job_never_runs_another_kind_as_a_command(tmp_path):
    server = RecordingServer()
    marker = tmp_path / "ran"
    run_job(f"touch {marker}", server, tmp_path, kind="docker")
    assert not marker.exists()
    assert finished(server)["error"].startswith("could not start: kind: croniq-runner ")


def test_the_agent_runs_an_http_assignment_as_an_http_job(monkeypatch):
    made = []

    class Recorded(HttpJob):
        def start(self):
            made.append(type(self))

    monkeypatch.setattr("croniq_runner.agent.HttpJob", Recorded)
    agent = Agent(Config(server="http://croniq.test", token="t", name="n"))
    agent.leases = LeaseBook(30.0)
    agent.accept({"id": 1, "lease": 1, "command": "", "kind": "http", "http": {}}, 0.0)
    assert made == [Recorded]
