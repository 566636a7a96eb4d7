"""http jobs through real processes (docs/design.md §15): jobs written over
the management API, run by a real agent (from its wheel) against an HTTP
endpoint this test serves on 127.0.0.1. An expected status succeeds, a 503
fails the run with "HTTP 503", and a secret named in a header reaches the
endpoint resolved while the run's log, which holds the endpoint's answer
echoing it, shows `***` in its place. On SQLite, and on PostgreSQL when the
suite runs there."""

import http.server
import threading

import pytest
import requests
from cryptography.fernet import Fernet

from harness.processes import Server, manage, start_agent, wait_for
from tests.agent.world import ready

pytestmark = pytest.mark.e2e

VALUE = "tok-5c1e9a77-never-in-a-log"
KEYS = Fernet.generate_key().decode()
LABELS = ["e2e-http"]


class Endpoint(http.server.ThreadingHTTPServer):
    """What a job's request reaches: /ok answers 200, /gone 410, /down 503,
    and /hook (POST) 202 with the Authorization it was sent echoed in its
    body, as a careless service might. Every request is kept in `seen`."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.seen: list[dict] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.record(b"")
        answers = {"/ok": (200, b"all good\n"), "/gone": (410, b"moved on\n")}
        status, body = answers.get(self.path, (503, b"down for maintenance\n"))
        self.answer(status, body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.record(body)
        self.answer(202, b"accepted; you sent " + self.headers["Authorization"].encode() + b"\n")

    def record(self, body):
        with self.server.lock:
            self.server.seen.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "authorization": self.headers.get("Authorization"),
                    "body": body.decode(),
                }
            )

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def endpoint():
    server = Endpoint()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def jobs(base):
    never = "0 0 1 1 *"  # never during the test: a trigger runs each
    return [
        {"name": "http-ok", "kind": "http", "schedule": never, "labels": LABELS,
         "http": {"url": f"{base}/ok"}},
        {"name": "http-gone", "kind": "http", "schedule": never, "labels": LABELS,
         "http": {"url": f"{base}/gone", "expect_status": [410]}},
        {"name": "http-down", "kind": "http", "schedule": never, "labels": LABELS,
         "http": {"url": f"{base}/down"}},
        {"name": "http-secret", "kind": "http", "schedule": never, "labels": LABELS,
         "http": {"method": "POST", "url": f"{base}/hook",
                  "headers": {"Authorization": "Bearer ${secret:hook-token}"},
                  "body": '{"event": "nightly"}'}},
    ]  # fmt: skip


def test_http_jobs_succeed_fail_and_keep_their_secret_out_of_the_log(
    e2e_database, tmp_path, endpoint
):
    server = Server(e2e_database, tmp_path / "web.log", CRONIQ_SECRETS_KEYS=KEYS)
    agent = None
    try:
        key = manage(e2e_database, "create_api_key", "ops", "--scopes", "admin").stdout.strip()
        token = manage(e2e_database, "create_runner_token", "http").stdout.strip()
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {key}"
        url = ready(server).url + "/api/v1/"

        stored = api.post(url + "secrets", json={"name": "hook-token", "value": VALUE}, timeout=30)
        assert stored.status_code == 201, stored.text
        runs = {}
        for job in jobs(endpoint.url):
            made = api.post(url + "jobs", json=job, timeout=30)
            assert made.status_code == 201, made.text
            trigger = api.post(url + f"jobs/{job['name']}/trigger", timeout=30)
            runs[job["name"]] = trigger.json()["execution_id"]

        agent = start_agent(
            server.url, token, tmp_path / "agent.log", "--labels", ",".join(LABELS),
            "--capacity", "4",
        )  # fmt: skip

        def ended():
            found = {}
            for name, run in runs.items():
                answer = api.get(url + f"executions/{run}", timeout=30).json()
                if answer["state"] in ("pending", "running"):
                    return None
                found[name] = answer
            return found

        done = wait_for(ended, timeout=90, interval=0.2, message="the http runs to end")

        def log(name):
            return api.get(url + f"executions/{runs[name]}/log", timeout=30).json()["data"]

        # Any 2xx by default; a listed status, here a 410, when the job lists it.
        for name, line, body in (("http-ok", "200 OK", "all good"), ("http-gone", "410 Gone",
                                                                        "moved on")):  # fmt: skip
            assert (done[name]["state"], done[name]["exit_code"]) == ("succeeded", 0), done[name]
            assert log(name).startswith(f"HTTP/1.1 {line}\n"), log(name)
            assert log(name).endswith(f"\n\n{body}\n"), log(name)

        down = done["http-down"]
        assert (down["state"], down["exit_code"], down["error"]) == ("failed", None, "HTTP 503")
        assert log("http-down").startswith("HTTP/1.1 503 Service Unavailable\n")
        assert "down for maintenance" in log("http-down")

        # The endpoint got the secret resolved; the log shows its echo masked.
        [hook] = [seen for seen in endpoint.seen if seen["path"] == "/hook"]
        assert hook == {
            "method": "POST",
            "path": "/hook",
            "authorization": f"Bearer {VALUE}",
            "body": '{"event": "nightly"}',
        }
        assert done["http-secret"]["state"] == "succeeded", done["http-secret"]
        assert log("http-secret").startswith("HTTP/1.1 202 Accepted\n")
        assert log("http-secret").endswith("\n\naccepted; you sent Bearer ***\n")
        shown = api.get(url + "jobs/http-secret", timeout=30)
        assert "Bearer ${secret:hook-token}" in shown.text and VALUE not in shown.text
        for name in runs:
            assert VALUE not in log(name)
        assert VALUE not in server.output() and VALUE not in agent.output()
        assert sorted(seen["path"] for seen in endpoint.seen) == ["/down", "/gone", "/hook", "/ok"]
    finally:
        if agent is not None:
            agent.stop()
            print(f"--- agent\n{agent.output()}")
        server.stop()
