"""The ping endpoints of a real web process (docs/design.md §12): crontab
lines with curl, as healthchecks.io's, against uvicorn; the flood limit
shared by two web processes on one database."""

import pytest
import requests

from harness.processes import Server, query
from tests.agent.world import python

pytestmark = pytest.mark.e2e

MAKE_CHECKS = """
from checks.models import Check
for name in ("backup", "report"):
    print(Check.objects.create(name=name, period=3600, grace=60).token)
"""


@pytest.fixture
def tokens(e2e_database):
    out = python(e2e_database, MAKE_CHECKS).split()
    return dict(zip(("backup", "report"), out, strict=True))


def state(database_url, name):
    [(found,)] = query(database_url, "SELECT state FROM checks_check WHERE name = %s", (name,))
    return found


def pings(database_url, name):
    return query(
        database_url,
        "SELECT p.kind, p.exit_status, p.body, p.body_truncated FROM checks_ping p "
        "JOIN checks_check c ON c.id = p.subject_id WHERE c.name = %s ORDER BY p.n",
        (name,),
    )


def test_curl_style_pings_move_the_check(server, e2e_database, tokens):
    base = f"{server.url}/ping/{tokens['backup']}"

    first = requests.get(base, timeout=10)
    assert (first.status_code, first.text) == (200, "OK")
    assert state(e2e_database, "backup") == "up"
    assert requests.post(base + "/start", timeout=10).status_code == 200
    assert requests.post(base + "/log", data=b"half way", timeout=10).status_code == 200
    assert requests.post(base + "/2", data=b"disk full", timeout=10).status_code == 200
    assert state(e2e_database, "backup") == "down"
    assert requests.get(base + "/0", timeout=10).status_code == 200
    assert state(e2e_database, "backup") == "up"
    assert requests.get(base + "/fail", timeout=10).status_code == 200
    assert state(e2e_database, "backup") == "down"

    assert [(kind, status, body) for kind, status, body, _ in pings(e2e_database, "backup")] == [
        ("success", None, ""),
        ("start", None, ""),
        ("log", None, "half way"),
        ("exit", 2, "disk full"),
        ("exit", 0, ""),
        ("fail", None, ""),
    ]
    events = query(e2e_database, "SELECT name FROM notifications_event ORDER BY id")
    assert [name for (name,) in events] == ["check.down", "check.up", "check.down"]
    assert state(e2e_database, "report") == "new"  # untouched


def test_strangers_bodies_and_heads(server, e2e_database, tokens):
    assert requests.get(f"{server.url}/ping/{'A' * 43}", timeout=10).status_code == 404
    assert requests.get(f"{server.url}/ping/{tokens['report']}/256", timeout=10).status_code == 400
    head = requests.head(f"{server.url}/ping/{tokens['report']}", timeout=10)
    assert head.status_code == 200
    assert state(e2e_database, "report") == "new"

    big = requests.post(
        f"{server.url}/ping/{tokens['report']}", data=b"x" * 300_000 + b"\xff", timeout=10
    )
    assert (big.status_code, big.headers["Croniq-Body-Truncated"]) == (200, "true")
    odd = requests.post(f"{server.url}/ping/{tokens['report']}/log", data=b"\xff\xfe", timeout=10)
    assert odd.status_code == 200
    [(_, _, kept, truncated), (_, _, text, _)] = pings(e2e_database, "report")
    assert (len(kept), truncated) == (100 * 1024, 1)
    assert text == "\ufffd\ufffd"


def test_the_flood_limit_holds_across_two_web_processes(server, e2e_database, tokens, tmp_path):
    other = Server(e2e_database, tmp_path / "web2.log").wait_ready()
    try:
        urls = [f"{process.url}/ping/{tokens['backup']}/log" for process in (server, other)]
        answers = [requests.get(urls[n % 2], timeout=10).status_code for n in range(130)]
    finally:
        other.stop()
    # 60 a minute for the token, whichever process each ping reached. The
    # burst takes a second or two: at most one minute boundary falls inside
    # it, so one window holds at least 65 pings and at most 120 get through.
    assert set(answers) == {200, 429}
    assert 60 <= answers.count(200) <= 120
    assert len(pings(e2e_database, "backup")) == answers.count(200)
    assert requests.get(f"{server.url}/ping/{tokens['report']}", timeout=10).status_code == 200


def test_pings_at_once_from_many_senders_are_each_recorded_once(
    server, e2e_database, tokens, tmp_path
):
    """Senders at once on two web processes: each process records the pings
    that wait while it writes in one transaction (checks.ping_batches), on
    PostgreSQL several at once, locking the checks in token order. Every
    ping answered 200 is recorded once, numbered without a gap, and none
    is refused for a deadlock or a lock."""
    from concurrent.futures import ThreadPoolExecutor

    other = Server(e2e_database, tmp_path / "web2.log").wait_ready()
    names = ("backup", "report")

    def send(sender):
        with requests.Session() as session:
            return [
                session.get(
                    f"{(server, other)[sender % 2].url}/ping/{tokens[names[n % 2]]}/log",
                    timeout=10,
                ).status_code
                for n in range(sender, sender + 12)
            ]

    try:
        with ThreadPoolExecutor(8) as senders:
            answers = [status for batch in senders.map(send, range(8)) for status in batch]
    finally:
        other.stop()
    assert answers == [200] * 96  # 48 a check: under its flood limit of 60 a minute
    for name in names:
        numbers = query(
            e2e_database,
            "SELECT p.n FROM checks_ping p JOIN checks_check c ON c.id = p.subject_id "
            "WHERE c.name = %s ORDER BY p.n",
            (name,),
        )
        [(counted,)] = query(
            e2e_database, "SELECT n_pings FROM checks_check WHERE name = %s", (name,)
        )
        assert [n for (n,) in numbers] == list(range(1, counted + 1))
        assert counted == 48
