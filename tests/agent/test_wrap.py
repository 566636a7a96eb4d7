"""`croniq-runner wrap` (docs/design.md §12) against a real HTTP server on a
local socket that records the pings: the command's outcome is its own,
whatever the server does."""

import io
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from croniq_runner import wrap
from croniq_runner.agent import main as agent_main

TOKEN = "b7c2e0a4-check"


class PingServer:
    """Records (method, path, body) of every request; answers `status`,
    or holds each request until released when `hold` is set."""

    def __init__(self, status=200):
        self.status = status
        self.requests = []
        self.hold = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                server.requests.append(("POST", self.path, body))
                if server.hold is not None:
                    server.hold.wait(10)
                self.send_response(server.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def paths(self):
        return [path for _, path, _ in self.requests]

    def close(self):
        if self.hold is not None:
            self.hold.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    ping_server = PingServer()
    yield ping_server
    ping_server.close()


def closed_port_url():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there any more


def wrap_process(args, env=None, stdin=None):
    """`croniq-runner wrap ARGS` as cron would start it: a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "croniq_runner.agent", "wrap", *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def test_a_successful_command_pings_start_then_success_with_its_output(server):
    done = wrap_process(["--check", TOKEN, "--server", server.url, "--", "sh", "-c", "echo hi"])
    assert done.returncode == 0
    assert done.stdout == b"hi\n"  # passed through as cron would mail it
    assert server.requests == [
        ("POST", f"/ping/{TOKEN}/start", b""),
        ("POST", f"/ping/{TOKEN}", b"hi\n"),
    ]


def test_a_failing_command_pings_its_exit_status_and_exits_with_it(server):
    script = "echo out; echo err >&2; exit 3"
    done = wrap_process(["--check", TOKEN, "--server", server.url, "--", "sh", "-c", script])
    assert done.returncode == 3
    assert (done.stdout, done.stderr) == (b"out\n", b"err\n")
    assert server.paths == [f"/ping/{TOKEN}/start", f"/ping/{TOKEN}/3"]
    assert sorted(server.requests[1][2].splitlines()) == [b"err", b"out"]


def test_the_server_comes_from_croniq_server_like_the_agents(server):
    done = wrap_process(["--check", TOKEN, "--", "true"], env={"CRONIQ_SERVER": server.url + "/"})
    assert done.returncode == 0
    assert server.paths == [f"/ping/{TOKEN}/start", f"/ping/{TOKEN}"]


def test_the_body_is_the_last_10_kb_of_the_output(server):
    script = "head -c 50000 /dev/zero | tr '\\0' a; printf END"
    done = wrap_process(["--check", TOKEN, "--server", server.url, "--", "sh", "-c", script])
    assert len(done.stdout) == 50003
    body = server.requests[-1][2]
    assert len(body) == 10 * 1024 and body.endswith(b"aaaEND")


def test_standard_input_reaches_the_command(server):
    done = wrap_process(["--check", TOKEN, "--server", server.url, "--", "cat"], stdin=b"% input")
    assert done.stdout == b"% input"


def test_a_server_that_is_down_changes_nothing_but_a_line_on_stderr():
    url = closed_port_url()
    done = wrap_process(["--check", TOKEN, "--server", url, "--", "sh", "-c", "echo ok; exit 4"])
    assert done.returncode == 4
    assert done.stdout == b"ok\n"
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("croniq-runner wrap: ping /start not sent: ConnectionError")
    assert lines[1].startswith("croniq-runner wrap: ping /4 not sent: ConnectionError")


@pytest.mark.parametrize("status", [404, 429, 500])
def test_a_refused_ping_changes_nothing_but_a_line_on_stderr(status):
    refusing = PingServer(status=status)
    try:
        done = wrap_process(["--check", TOKEN, "--server", refusing.url, "--", "true"])
    finally:
        refusing.close()
    assert done.returncode == 0
    assert done.stderr.decode().splitlines() == [
        f"croniq-runner wrap: ping /start answered {status}",
        f"croniq-runner wrap: ping (success) answered {status}",
    ]


def test_a_server_that_never_answers_costs_at_most_the_ping_timeout(server, monkeypatch):
    server.hold = threading.Event()  # each request held until the test ends
    monkeypatch.setattr(wrap, "PING_TIMEOUT", (0.5, 0.3))
    out, err = io.BytesIO(), io.BytesIO()
    status = wrap.run(["sh", "-c", "exit 5"], wrap.Pinger(server.url, TOKEN, err), out, err)
    assert status == 5
    # Only the read timeout ends a held request, and each ping is sent once:
    # two timeouts, two requests, no retry.
    assert err.getvalue().decode().count("ReadTimeout") == 2
    assert server.paths == [f"/ping/{TOKEN}/start", f"/ping/{TOKEN}/5"]


def test_without_a_server_the_command_runs_without_pings():
    env = {"CRONIQ_SERVER": ""}
    done = wrap_process(["--check", TOKEN, "--", "sh", "-c", "echo ran; exit 6"], env=env)
    assert (done.returncode, done.stdout) == (6, b"ran\n")
    assert done.stderr.decode() == (
        "croniq-runner wrap: no server (pass --server URL or set CRONIQ_SERVER): "
        "running the command without pings\n"
    )
    done = wrap_process(["--check", TOKEN, "--server", "croniq.example", "--", "true"])
    assert done.returncode == 0
    assert "--server is not an http(s) URL: 'croniq.example'" in done.stderr.decode()


def test_a_command_that_cannot_run_is_127_and_pinged(server):
    done = wrap_process(["--check", TOKEN, "--server", server.url, "--", "/no/such/command"])
    assert done.returncode == 127
    assert server.paths == [f"/ping/{TOKEN}/start", f"/ping/{TOKEN}/127"]
    assert b"cannot run /no/such/command" in server.requests[1][2]


def test_a_command_killed_by_a_signal_exits_128_plus_it(server):
    script = "echo dying; kill -9 $$"
    done = wrap_process(["--check", TOKEN, "--server", server.url, "--", "sh", "-c", script])
    assert done.returncode == 137
    assert server.requests[-1][1:] == (f"/ping/{TOKEN}/137", b"dying\n")


def test_sigterm_to_wrap_reaches_the_command_and_its_status_is_pinged(server):
    command = [
        sys.executable,
        "-m",
        "croniq_runner.agent",
        "wrap",
        "--check",
        TOKEN,
        "--server",
        server.url,
        "--",
        "sh",
        "-c",
        "trap 'echo bye; exit 9' TERM; echo up; while :; do sleep 0.05; done",
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE) as process:
        assert process.stdout.readline() == b"up\n"
        process.terminate()
        assert process.wait(30) == 9
        assert process.stdout.read() == b"bye\n"
    assert server.paths[-1] == f"/ping/{TOKEN}/9"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--check", TOKEN], "no command"),
        (["--check", TOKEN, "--"], "no command"),
        (["--", "true"], "the following arguments are required: --check"),
        (["--check", "a/b", "--", "true"], "--check: 'a/b' is not a ping token"),
    ],
)
def test_usage_errors_exit_2_and_run_nothing(args, problem, capsys):
    assert agent_main(["wrap", *args]) == 2
    assert problem in capsys.readouterr().err


def test_everything_after_the_double_dash_is_the_commands(server):
    script = 'echo "$@"'
    args = ["--check", TOKEN, "--server", server.url, "--", "sh", "-c", script, "sh"]
    done = wrap_process([*args, "--server", "elsewhere", "--check", "x"])
    assert done.stdout == b"--server elsewhere --check x\n"
    assert server.paths == [f"/ping/{TOKEN}/start", f"/ping/{TOKEN}"]
