"""A tiny real HTTP server on localhost that answers from a script and
keeps what it was asked: the `croniq` CLI's calls without a Croniq server."""

import http.server
import json
import threading
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit


@dataclass
class Asked:
    method: str
    path: str
    query: dict
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


class Scripted:
    def __init__(self):
        self.answers = []
        self.asked = []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve = lambda: self.server.serve_forever(poll_interval=0.02)  # noqa: E731
        threading.Thread(target=serve, daemon=True).start()

    def answer(self, status, body=None, headers=None):
        """Queue the next answer (one per request, in order)."""
        self.answers.append((status, body, headers or {}))
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def handler(self):
        scripted = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                scripted.asked.append(
                    Asked(
                        self.command,
                        parts.path,
                        {k: v[-1] for k, v in parse_qs(parts.query).items()},
                        dict(self.headers),
                        self.rfile.read(length),
                    )
                )
                status, body, headers = (
                    scripted.answers.pop(0) if scripted.answers else (599, None, {})
                )
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = answer  # noqa: N815 (http.server's naming)

            def log_message(self, *args):
                pass

        return Handler
