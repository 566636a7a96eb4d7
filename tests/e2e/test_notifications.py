"""Notifications with real processes: a job fails on a real agent, the loop
routes and delivers, and a receiver in its own process verifies what it got.

The receiver (tests/e2e/webhook_receiver.py) checks the signature as
docs/design.md §9 says, as a user's receiver would. Retries with one delivery id
and a hanging receiver are in tests/e2e/test_notification_delivery.py.
"""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from harness.processes import (
    LAYOUTS,
    free_port,
    manage,
    query,
    start_agent,
    start_web_and_loop,
    wait_for,
)
from tests.agent.world import add_execution, issue_token

pytestmark = pytest.mark.e2e

RECEIVER = Path(__file__).with_name("webhook_receiver.py")
SECRET = "e2e-hook-secret"
PUBLIC_URL = "https://croniq.example.com"

NOTIFY = """
channels:
  - name: ops-hook
    kind: webhook
    url: {url}
    secret: ${{CRONIQ_SECRET_HOOK}}
    timeout: {timeout}
notify:
  - name: failures
    events: [execution.given_up, job.recovered]
    channels: [ops-hook]
"""


class Receiver:
    def __init__(self, tmp_path, *args):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.out = tmp_path / f"hits-{self.port}.jsonl"
        self.process = subprocess.Popen(
            [sys.executable, str(RECEIVER), "--port", str(self.port), "--secret", SECRET,
             "--out", str(self.out), *args],
        )  # fmt: skip
        wait_for(self.listening, timeout=10, message="the receiver listening")

    def listening(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
        except OSError:
            return False
        return True

    def hits(self):
        if not self.out.exists():
            return []
        return [json.loads(line) for line in self.out.read_text().splitlines()]

    def stop(self):
        self.process.kill()
        self.process.wait()


@pytest.fixture
def receivers(tmp_path):
    started = []

    def start(*args):
        receiver = Receiver(tmp_path, *args)
        started.append(receiver)
        return receiver

    yield start
    for receiver in started:
        receiver.stop()


def cluster(layout, db, tmp_path, receiver, timeout=5):
    """Channels and rules applied, then web, loop and one agent started."""
    path = tmp_path / "notify.yaml"
    path.write_text(NOTIFY.format(url=receiver.url, timeout=timeout))
    env = dict(CRONIQ_SECRET_HOOK=SECRET, CRONIQ_PUBLIC_URL=PUBLIC_URL, CRONIQ_NOTIFIER="1")
    manage(db, "apply", str(path), **env)
    server, processes = start_web_and_loop(layout, db, tmp_path, "--interval", "0.2", **env)
    token = issue_token(db)
    processes.append(
        start_agent(server.url, token, tmp_path / "agent.log", "--name", "a1", "--labels", "e2e")
    )
    return processes


def deliveries(db, execution_id):
    return query(
        db,
        "SELECT d.attempt, d.ok, d.status_code, d.error, n.id FROM notifications_delivery d"
        " JOIN notifications_notification n ON n.id = d.notification_id"
        " JOIN notifications_event e ON e.id = n.event_id"
        " WHERE e.execution_id = %s ORDER BY d.attempt",
        (execution_id,),
    )


@pytest.mark.parametrize("layout", LAYOUTS, indirect=True)
def test_a_failed_run_reaches_the_receiver_signed_and_tampering_is_caught(
    layout, e2e_database, tmp_path, receivers
):
    receiver = receivers()
    processes = cluster(layout, e2e_database, tmp_path, receiver)
    try:
        execution_id = add_execution(e2e_database, "nightly-import", "exit 3", labels=["e2e"])
        (hit,) = wait_for(receiver.hits, timeout=30, message="the webhook")
        assert hit["verified"] is True
        body = json.loads(hit["raw"])
        assert hit["event"] == body["event"] == "execution.given_up"
        assert hit["delivery"] == body["id"]
        assert body["job"]["name"] == "nightly-import"
        assert body["execution"]["id"] == execution_id
        assert body["execution"]["exit_code"] == 3
        assert body["url"] == f"{PUBLIC_URL}/executions/{execution_id}/"
        assert "nightly-import" in body["summary"]
        ((attempt, ok, status, _, _),) = wait_for(lambda: deliveries(e2e_database, execution_id))
        assert (attempt, bool(ok), status) == (1, True, 200)

        # The same request with one byte changed is refused by the receiver.
        tampered = hit["raw"].replace("nightly-import", "nightly-imporT", 1).encode()
        headers = {"Croniq-Signature": hit["signature"], "Croniq-Event": hit["event"]}
        answer = requests.post(receiver.url, data=tampered, headers=headers, timeout=5)
        assert answer.status_code == 401
        assert receiver.hits()[-1]["verified"] is False
    finally:
        for process in reversed(processes):
            process.stop()
