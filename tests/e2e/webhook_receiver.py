"""A webhook receiver as a Croniq user would write one, run as its own process.

It verifies each request as docs/design.md §9 says (HMAC-SHA256 of the secret
over "<t>.<raw body>", t fresh), answers 401 to a bad signature, and appends
one JSON line per request to --out: the headers that matter, the body, and
whether the signature held. --fail-first N answers 500 to the first N
requests; --hang makes every request wait 60 s before answering.

    python tests/e2e/webhook_receiver.py --port 9100 --secret s3cret --out hits.jsonl
"""

import argparse
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE = 300


def verified(secret, header, body, now):
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > TOLERANCE:
        return False
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return hmac.compare_digest(expected.hexdigest(), fields.get("v1", ""))


def serve(port, secret, out, fail_first, hang):
    lock = threading.Lock()
    seen = {"count": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            ok = verified(secret, self.headers.get("Croniq-Signature", ""), body, time.time())
            with lock:
                seen["count"] += 1
                number = seen["count"]
                with open(out, "a") as log:
                    log.write(
                        json.dumps(
                            {
                                "n": number,
                                "at": time.time(),
                                "verified": ok,
                                "event": self.headers.get("Croniq-Event"),
                                "delivery": self.headers.get("Croniq-Delivery"),
                                "signature": self.headers.get("Croniq-Signature"),
                                "raw": body.decode(errors="replace"),
                            }
                        )
                        + "\n"
                    )
            if hang:
                time.sleep(60)
            status = 401 if not ok else 500 if number <= fail_first else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--hang", action="store_true")
    args = parser.parse_args()
    serve(args.port, args.secret, args.out, args.fail_first, args.hang)


if __name__ == "__main__":
    main()
