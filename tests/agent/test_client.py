"""The HTTP client against a tiny real HTTP server on localhost."""

import http.server
import json
import logging
import threading

import pytest

from croniq_runner.client import Client, Conflict, Transient
from harness.processes import free_port


class Answer409(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"detail": "session superseded"}).encode()
        self.send_response(409)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def port():
    return free_port()  # a server listens on it later in the test


def test_a_refusal_after_an_outage_counts_as_reconnected(port, caplog):
    caplog.set_level(logging.INFO, logger="croniq.runner")
    client = Client(f"http://127.0.0.1:{port}", "crq_token")
    with pytest.raises(Transient, match="connection refused"):
        client.post("/api/v1/runners/1/heartbeat", {"session": "s"}, timeout=2)

    server = http.server.HTTPServer(("127.0.0.1", port), Answer409)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(Conflict, match="session superseded"):
            client.post("/api/v1/runners/1/heartbeat", {"session": "s"}, timeout=2)
    finally:
        server.shutdown()
        server.server_close()
    messages = [record.getMessage() for record in caplog.records]
    assert messages[0].startswith("cannot reach")
    assert messages[1].startswith("reached")
    assert client.link.up is True
