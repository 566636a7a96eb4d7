"""A real webhook receiver for the delivery tests: an HTTP server in a thread
that checks each request's signature the way a receiver should
(`channels.verify`), records it, and answers as the test scripts it."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from notifications import channels

SECRET = "hook-secret-for-tests"


class Hook(ThreadingHTTPServer):
    """Answers with `statuses` in turn (the last one repeats), after `delay`
    seconds; `hang` holds each request until `release` is set. A request
    whose signature does not verify is answered 401.

    `received`: one dict per request (delivery id, event, body, whether the
    signature verified, when it arrived)."""

    daemon_threads = True

    def __init__(self, statuses=(200,), delay=0.0, secret=SECRET, now=None):
        super().__init__(("127.0.0.1", 0), HookHandler)
        self.statuses = list(statuses)
        self.delay = delay
        self.secret = secret
        self.now = now or time.time  # what the signature's timestamp is checked against
        self.hang = False
        self.echo = None  # a request header whose value the answer's body repeats
        self.release = threading.Event()
        self.received = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/hook"

    def next_status(self):
        with self.lock:
            return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def handle_error(self, request, client_address):
        pass  # a sender killed mid-request: nothing to report

    def ids(self):
        return [request["delivery"] for request in self.received]

    def close(self):
        self.release.set()
        self.shutdown()
        self.server_close()
        self.thread.join(5)


class HookHandler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        raw = self.rfile.read(length)
        if len(raw) < length:
            return  # a sender killed mid-request: no request arrived
        hook = self.server
        verified = hook.secret is None or channels.verify(
            hook.secret, self.headers.get("Croniq-Signature"), raw, hook.now()
        )
        request = {
            "delivery": self.headers.get("Croniq-Delivery"),
            "event": self.headers.get("Croniq-Event"),
            "signature": self.headers.get("Croniq-Signature"),
            "raw": raw,
            "body": json.loads(raw) if verified else None,
            "verified": verified,
            "at": time.time(),
            "echoed": self.headers.get(hook.echo) if hook.echo else None,
        }
        with hook.lock:
            hook.received.append(request)
        if hook.hang:
            hook.release.wait(30)
            return
        if hook.delay:
            time.sleep(hook.delay)
        status = hook.next_status() if verified else 401
        self.send_response(status)
        reply = (request["echoed"] or "ok").encode()
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format, *args):
        pass
