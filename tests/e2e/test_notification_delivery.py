"""A real scheduler_loop delivers notifications to a real receiver: the
notifier it starts, its wake-ups (LISTEN on PostgreSQL, the short poll on
SQLite), retries with one delivery id, and a hanging receiver that never
delays firing."""

import time
from datetime import UTC, datetime

import pytest
import yaml

from harness.hooks import SECRET, Hook
from harness.processes import manage, query, start_loop, wait_for
from tests.e2e.notification_rows import (
    SECRET_VARIABLE,
    delivery_rows,
    insert_notifications,
    states,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def loop(e2e_database, tmp_path):
    process = start_loop(
        e2e_database,
        tmp_path / "loop.log",
        "--interval",
        "0.2",
        CRONIQ_NOTIFIER="1",
        CRONIQ_NOTIFY_WORKERS=2,
        **{SECRET_VARIABLE: SECRET},
    )
    try:
        # Slow machines take a while to start Django and run the first tick.
        wait_for(lambda: "notifier started" in process.output(), timeout=90, message="notifier")
    except AssertionError:
        process.kill()
        raise
    yield process
    # A clean exit, however long the last hung try takes to give up (a loaded
    # machine once took more than the default 10 s after "notifier stopped").
    assert process.stop(timeout=30) == 0, process.output()


def test_a_notification_written_to_the_database_reaches_the_receiver(e2e_database, loop):
    hook = Hook()
    try:
        [sent] = insert_notifications(e2e_database, hook.url)
        committed = time.time()
        wait_for(lambda: hook.received, timeout=10, message="the delivery")
        wait_for(lambda: states(e2e_database)[sent][0] == "delivered", message="the record")
    finally:
        hook.close()

    [request] = hook.received
    assert request["verified"] and request["delivery"] == sent == request["body"]["id"]
    assert request["event"] == "execution.failed"
    # The shell's commit is noticed by NOTIFY (PostgreSQL) or the 50 ms poll.
    assert request["at"] - committed < 2.0
    assert delivery_rows(e2e_database)[sent] == [(1, True)]


def test_a_receiver_answering_500_twice_gets_the_same_delivery_id_three_times(e2e_database, loop):
    hook = Hook(statuses=[500, 500, 200])
    try:
        [sent] = insert_notifications(e2e_database, hook.url)
        wait_for(lambda: states(e2e_database)[sent][0] == "delivered", message="the third try")
    finally:
        hook.close()

    assert hook.ids() == [sent, sent, sent]
    assert all(request["verified"] for request in hook.received)
    assert delivery_rows(e2e_database)[sent] == [(1, False), (2, False), (3, True)]
    arrivals = [request["at"] for request in hook.received]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    # 1 s, then 2 s of backoff, counted from when each try left: a try that
    # took a while to arrive makes the next gap look shorter by as much.
    assert 0.6 < gaps[0] < 2.0 and 1.6 < gaps[1] < 3.0 and gaps[1] > gaps[0]


def test_a_hanging_receiver_never_delays_firing(e2e_database, loop, tmp_path):
    jobs = {"jobs": [{"name": "every-second", "schedule": "@every 1s", "command": "true"}]}
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(jobs))
    manage(e2e_database, "apply", str(path))
    hook = Hook()
    hook.hang = True
    try:
        # More than the loop's two delivery lanes: every lane hangs.
        insert_notifications(e2e_database, hook.url, count=4, timeout=4.0)
        wait_for(lambda: len(hook.received) == 2, message="both lanes to hang")
        hung_at = time.time()
        time.sleep(3.5)
        fired = fired_between(e2e_database, hung_at, time.time())
    finally:
        hook.close()
    # The loop fired each second while every delivery lane hung.
    assert len(fired) >= 3, fired
    gaps = {round((b - a).total_seconds()) for a, b in zip(fired, fired[1:], strict=False)}
    assert gaps == {1}


def fired_between(database, start, end):
    rows = query(
        database,
        "SELECT e.scheduled_for FROM scheduler_execution e JOIN scheduler_job j "
        "ON j.id = e.job_id WHERE j.name = 'every-second' ORDER BY e.scheduled_for",
    )
    instants = [parse(value) for (value,) in rows]
    return [at for at in instants if start <= at.timestamp() <= end]


def parse(value):
    if not isinstance(value, datetime):
        value = datetime.fromisoformat(str(value).replace(" ", "T"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)
