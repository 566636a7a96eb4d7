"""An HTTP proxy that can rewrite one kind of answer: a planted protocol break
between the conformance suite and a real server."""

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class RewritingProxy(ThreadingHTTPServer):
    """Forwards every request to `target_port`; `rewrite(method, path, status,
    body)` returns the (status, body) the client gets instead."""

    daemon_threads = True

    def __init__(self, target_port, rewrite):
        super().__init__(("127.0.0.1", 0), _Forward)
        self.target_port = target_port
        self.rewrite = rewrite
        self.rewritten = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, name="rewriting-proxy", daemon=True).start()

    def close(self):
        self.shutdown()
        self.server_close()


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 - the name http.server calls
        self.forward()

    do_GET = do_POST  # noqa: N815

    def forward(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.target_port, timeout=90)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            status, data = answer.status, answer.read()
            answer_headers = answer.getheaders()
        finally:
            upstream.close()
        new_status, new_data = self.server.rewrite(self.command, self.path, status, data)
        if (new_status, new_data) != (status, data):
            self.server.rewritten.append((self.command, self.path, status, new_status))
        self.send_response(new_status)
        for name, value in answer_headers:
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(new_data)))
        self.end_headers()
        self.wfile.write(new_data)

    def log_message(self, *args):
        pass
