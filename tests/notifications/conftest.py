"""Shared by the notification tests: real receivers for the channel tests
(an HTTP server in a thread that records what reaches it, and the
notification they deliver), and the channels, rules and events the routing
tests start from."""

import datetime as dt
import itertools
import socket
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection

from notifications import channels
from notifications.models import Channel, Rule
from notifications.recording import record_event
from scheduler.models import Execution
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

NOW = datetime(2026, 3, 2, 3, 0, 12, tzinfo=UTC)
# How long a hanging receiver holds a request before it lets go (unanswered).
HANG = 60


class Receiver(ThreadingHTTPServer):
    """Answers each POST with `status` and `reply` (or hangs when `hang`),
    after recording (path, headers, body) in `received`. With a `secret` it
    checks the signature first, as docs/design.md §9 tells receivers to, and
    answers 401 when it does not verify at NOW."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.received = []
        self.status = 200
        self.reply = b"ok"
        self.hang = False
        self.secret = None
        self.released = threading.Event()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class ReceiverHandler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.received.append((self.path, dict(self.headers), body))
        signature = self.headers.get("Croniq-Signature")
        if self.server.secret and not channels.verify(self.server.secret, signature, body, NOW):
            return self.answer(401, b"bad signature")
        if self.server.hang:
            self.server.released.wait(HANG)
            return
        self.answer(self.server.status, self.server.reply)

    def answer(self, status, reply):
        self.send_response(status)
        if 300 <= status < 400:
            self.send_header("Location", "https://elsewhere.example/hook")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format, *args):
        pass


@pytest.fixture
def receiver():
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield server
    server.released.set()
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture
def closed_port():
    """A local port nobody listens on: connecting to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def message():
    return {
        "id": "5f0c2a9e-delivery-1",
        "event": "execution.given_up",
        "at": "2026-03-02T03:00:12Z",
        "summary": "billing-sync failed 3 times in a row",
        "job": {"name": "billing-sync", "owner": "team-a", "labels": ["linux", "db"]},
        "execution": {
            "id": 4711,
            "scheduled_for": "2026-03-02T03:00:00Z",
            "attempt": 3,
            "state": "failed",
            "exit_code": 2,
            "duration": 12.5,
        },
        "runner": {"name": "build-3"},
        "url": "https://croniq.example.com/dashboard/jobs/billing-sync",
        "details": ["attempt 1: exit code 2", "attempt 2: exit code 2"],
    }


# Routing: channels, rules and events at fixed instants.

T0 = dt.datetime(2026, 6, 1, 2, 0, tzinfo=dt.UTC)
# Each made execution its own instant (one execution per job, instant, attempt).
_instants = itertools.count()


def make_channel(name="ops-hook", **fields):
    fields.setdefault("kind", Channel.WEBHOOK)
    fields.setdefault("url", "https://hooks.example.com/croniq")
    return Channel.objects.create(name=name, **fields)


def make_rule(name, events, targets, **fields):
    rule = Rule.objects.create(name=name, events=list(events), **fields)
    rule.channels.set(targets)
    return rule


def failed_execution(job, runner=None, attempt=1, exit_code=3, at=T0):
    """A finished failed attempt of `job` (as settle leaves it)."""
    return ExecutionFactory(
        job=job,
        scheduled_for=T0 - dt.timedelta(days=1, seconds=next(_instants)),
        attempt=attempt,
        state=Execution.FAILED,
        runner=runner,
        exit_code=exit_code,
        claimed_at=at - dt.timedelta(seconds=42),
        finished_at=at,
    )


def failure(name="execution.failed", job=None, runner=None, at=T0, data=None, **job_fields):
    """Record a failure-type event of `job` (a new job when None), its
    execution run by `runner`."""
    job = job or JobFactory(**job_fields)
    execution = failed_execution(job, runner=runner, at=at)
    return record_event(name, at=at, job=job, execution=execution, data=data)


@pytest.fixture
def channel(db):
    return make_channel()


@pytest.fixture
def runner(db):
    return RunnerFactory(name="build-3", labels=["linux", "db"])


@pytest.fixture
def job(db):
    return JobFactory(name="billing-sync", owner="team-a", labels=["linux", "db"], retries=2)


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("SKIP LOCKED races need PostgreSQL; SQLite serialises writers")
