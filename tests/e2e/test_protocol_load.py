"""Long-polls under load: waiting polls hold no thread the server needs and no connection."""

import threading
import time

import pytest
import requests

from harness.processes import on_postgres
from tests.e2e.protocol_client import RunnerClient, query, seed, start_server, token

pytestmark = pytest.mark.e2e


@pytest.fixture
def server(e2e_database, tmp_path):
    process = start_server(e2e_database, tmp_path / "web.log")
    yield process
    process.stop()


POLLS = 200
BURST = 100


def connections_to(db_url):
    import psycopg

    name = db_url.rsplit("/", 1)[1]
    admin = db_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [name]
        ).fetchone()
    return row[0]


def test_200_idle_long_polls_leave_healthz_answering_and_hold_no_connections(server, e2e_database):
    """How fast /healthz answers meanwhile is a figure of
    bench/healthz_under_long_polls.py; here: it answers, and no poll holds
    a database connection."""
    client = RunnerClient(server.url, token(e2e_database), labels=["linux"])
    assert client.register().status_code == 200
    answers = []

    def wait_for_work():
        answers.append(client.poll(wait=8))

    pollers = [threading.Thread(target=wait_for_work) for _ in range(POLLS)]
    for poller in pollers:
        poller.start()
    time.sleep(3)  # every poll has done its claim and is waiting now

    # Exhausted threads would hold /healthz until the polls end (seconds).
    for _ in range(5):
        assert requests.get(server.url + "/healthz", timeout=5).status_code == 200
    if on_postgres():
        # The runner threads' connections, the LISTEN one: not one per poll.
        assert connections_to(e2e_database) <= 12

    for poller in pollers:
        poller.join(20)
    assert len(answers) == POLLS
    assert all(a.status_code == 200 and a.json() == {"executions": []} for a in answers)


def test_a_burst_of_work_is_spread_over_waiting_runners_without_double_handout(
    server, e2e_database
):
    secret = token(e2e_database)
    runners = [RunnerClient(server.url, secret, labels=["linux"], capacity=10) for _ in range(20)]
    for runner in runners:
        runner.register()
    got = []
    lock = threading.Lock()
    seeded = threading.Event()
    deadline = time.monotonic() + 90

    errors = []

    def drain(runner):
        # Hold what arrives (no finish): every execution must reach exactly one runner.
        while time.monotonic() < deadline:
            answer = runner.poll(wait=2)
            if answer.status_code != 200:
                errors.append(answer.text)
                continue
            found = answer.json()["executions"]
            with lock:
                got.extend(e["id"] for e in found)
                if seeded.is_set() and len(got) >= BURST:
                    return

    threads = [threading.Thread(target=drain, args=(r,)) for r in runners]
    for thread in threads:
        thread.start()
    time.sleep(1)
    specs = ({"job": f"burst-{n}", "labels": ["linux"]} for n in range(BURST))
    ids = seed(e2e_database, *specs)
    seeded.set()
    for thread in threads:
        thread.join(100)
    assert errors == []
    missing = sorted(set(ids) - set(got))
    where = query(
        e2e_database,
        f"""
        from scheduler.models import Execution
        result = list(Execution.objects.filter(pk__in={missing}).values_list(
            "pk", "state", "session", "lease", "claimed_at"))
        """,
    )
    assert sorted(got) == sorted(ids), (missing, where, server.output()[-3000:])
