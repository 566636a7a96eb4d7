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
    normal_id,
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
        wait_for(lambda: hook.received, timeout=30, message="the delivery")
        wait_for(lambda: states(e2e_database)[sent][0] == "delivered", message="the record")
    finally:
        hook.close()

    [request] = hook.received
    assert request["verified"] and request["delivery"] == sent == request["body"]["id"]
    assert request["event"] == "execution.failed"
    # The shell's commit wakes the notifier (NOTIFY on PostgreSQL, the
    # commit itself on SQLite: tests/notifications/test_notifier.py); how
    # soon is bench/notifications.py's latency.
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
    # 1 s, then 2 s of backoff, from when each try left (the delivery log's
    # instants, not the arrivals: a try that took a while to arrive made the
    # next gap look shorter by as much). That the notifier sleeps until the
    # next try, not its poll: tests/notifications/test_notifier.py.
    left = try_instants(e2e_database, sent)
    gaps = [(b - a).total_seconds() for a, b in zip(left, left[1:], strict=False)]
    assert gaps[0] >= 1 and gaps[1] >= 2, gaps


def test_a_hanging_receiver_never_delays_firing(e2e_database, loop, tmp_path):
    jobs = {"jobs": [{"name": "every-second", "schedule": "@every 1s", "command": "true"}]}
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(jobs))
    manage(e2e_database, "apply", str(path))
    hook = Hook()
    hook.hang = True
    try:
        # More than the loop's two delivery lanes: every lane hangs. The
        # hook holds each request 30 s, the tries' timeout is a minute: a
        # tick that waited on a lane would wait at least 30 s.
        insert_notifications(e2e_database, hook.url, count=4, timeout=60.0)
        wait_for(lambda: len(hook.received) == 2, message="both lanes to hang")
        hung_at = time.time()
        fired = wait_for(
            lambda: (found := fired_between(e2e_database, hung_at, time.time()))[2:] and found,
            timeout=15,
            message="three instants fired while the lanes hang",
        )
        still_hung = len(hook.received) == 2  # no try ended, no lane took another
    finally:
        hook.close()
    # The loop fired each second while every delivery lane hung.
    assert still_hung
    gaps = {round((b - a).total_seconds()) for a, b in zip(fired, fired[1:], strict=False)}
    assert gaps == {1}


def try_instants(database, sent):
    """When each try of notification `sent` left, in order."""
    rows = query(
        database,
        "SELECT notification_id, at FROM notifications_delivery ORDER BY attempt",
    )
    return [parse(at) for pk, at in rows if normal_id(pk) == sent]


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
