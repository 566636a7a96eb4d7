"""The dispatch benches' HTTP client: a keep-alive connection the server
closed while it idled is opened again, not a failed call (a failed finish
kept its runner's slot, and the several-web-processes figures measured a
starved client)."""

import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "dispatch_latency.py"


@pytest.fixture
def lean_client():
    spec = importlib.util.spec_from_file_location("bench_dispatch", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LeanClient


class ClosesAfterEachAnswer(BaseHTTPRequestHandler):
    """Answers keep-alive, then closes the connection without saying so: what
    uvicorn does to a connection idle past its keep-alive timeout."""

    protocol_version = "HTTP/1.1"
    calls = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.calls.append(json.loads(body))
        answer = json.dumps({"n": len(self.calls)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)
        self.close_connection = True

    def log_message(self, *args):
        pass


def test_a_connection_the_server_closed_is_opened_again(lean_client):
    server = ThreadingHTTPServer(("127.0.0.1", 0), ClosesAfterEachAnswer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = lean_client(f"http://127.0.0.1:{server.server_port}", "secret")
    try:
        answers = [client.post("/finish", {"call": n})["n"] for n in range(3)]
    finally:
        client.connection.close()
        server.shutdown()
        server.server_close()
    assert answers == [1, 2, 3]
    assert ClosesAfterEachAnswer.calls == [{"call": 0}, {"call": 1}, {"call": 2}]  # each once
