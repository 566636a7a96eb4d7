"""scheduler.stalled from real web processes while no scheduler loop runs."""

import importlib.util
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.processes import Server, manage, query, wait_for
from tests.agent.world import python

pytestmark = pytest.mark.e2e

# Seconds: the web processes' watch looks every 10 s (stall_watch.CHECK_EVERY).
GRACE = 1
WATCH_LOOKS = 11


class Receiver(ThreadingHTTPServer):
    """A webhook receiver that keeps every request it gets."""

    def __init__(self):
        self.requests = []
        super().__init__(("127.0.0.1", 0), Hook)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append((dict(self.headers), json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def route_stalls_to(database, url):
    python(
        database,
        "from notifications.models import Channel, Rule\n"
        f"channel = Channel.objects.create(name='ops-hook', kind='webhook', url={url!r})\n"
        "rule = Rule.objects.create(name='stalls', events=['scheduler.stalled'])\n"
        "rule.channels.add(channel)\n",
    )


def stalled_events(database):
    return query(
        database, "SELECT key, data FROM notifications_event WHERE name = 'scheduler.stalled'"
    )


def test_web_processes_report_a_dead_loop_once(e2e_database, tmp_path):
    delivery = importlib.util.find_spec("notifications.delivery") is not None
    receiver = Receiver()
    route_stalls_to(e2e_database, receiver.url)
    # The loop ticked once, then stopped for good.
    manage(e2e_database, "scheduler_loop", "--once")
    servers = [
        Server(
            e2e_database, tmp_path / f"web-{i}.log", CRONIQ_STALL_WATCH=1, CRONIQ_STALL_GRACE=GRACE
        )
        for i in range(2)
    ]
    try:
        for server in servers:
            server.wait_ready()
        wait_for(lambda: stalled_events(e2e_database), timeout=30, message="scheduler.stalled")
        time.sleep(WATCH_LOOKS)  # every web process has looked again
        rows = stalled_events(e2e_database)
    finally:
        for server in servers:
            server.stop()
        receiver.shutdown()
        receiver.server_close()

    assert len(rows) == 1, rows
    key, data = rows[0]
    data = json.loads(data) if isinstance(data, str) else data
    assert key == f"scheduler.stalled:{data['last_tick']}:{GRACE}"
    # Reported once the last tick is more than GRACE old; `stalled_for` is
    # rounded to the millisecond, so a look just past the grace says GRACE.
    assert data["grace"] == GRACE and data["stalled_for"] >= GRACE
    logs = "".join(server.output() for server in servers)
    assert logs.count("scheduler.stalled reported") == 1, logs

    if not delivery:
        pytest.skip(
            "notifications.delivery is not in this build: the stall was recorded once, "
            "its delivery by the web process is checked once delivery is merged"
        )
    assert [headers["Croniq-Event"] for headers, _ in receiver.requests] == ["scheduler.stalled"]
    [(_, body)] = receiver.requests
    assert body["event"] == "scheduler.stalled"
