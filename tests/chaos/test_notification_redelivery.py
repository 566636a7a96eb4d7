"""The notifier killed with SIGKILL while it delivers to a slow receiver.

Delivery is at least once (docs/design.md §9): after restarts every notification
is delivered and none is lost. A receiver sees a delivery id twice only for
a notification whose try was cut off by a kill (sent, but the dead process
never recorded the answer): the restarted loop takes it over once its lease
has lapsed and sends it again, with the same id.
"""

import time

import pytest

from harness.hooks import SECRET, Hook
from harness.processes import drop_database, migrated_database, start_loop, wait_for
from tests.e2e.notification_rows import (
    SECRET_VARIABLE,
    delivery_rows,
    insert_notifications,
    states,
)

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

NOTIFICATIONS = 30
WORKERS = 4
ANSWER_AFTER = 1.0  # seconds the receiver takes to answer
TIMEOUT = 3.0  # the channel's: a cut-off claim lapses TIMEOUT + LEASE_MARGIN after it
KILLS = 2
SENT_SLACK = 0.5  # seconds between a try leaving the notifier and its stamp


@pytest.fixture
def database(tmp_path):
    url = migrated_database(tmp_path)
    yield url
    drop_database(url)


def loop_process(database, tmp_path, n):
    process = start_loop(
        database,
        tmp_path / f"loop-{n}.log",
        "--interval",
        "0.2",
        CRONIQ_NOTIFIER="1",
        CRONIQ_NOTIFY_WORKERS=WORKERS,
        **{SECRET_VARIABLE: SECRET},
    )
    try:
        # Slow machines take a while to start Django and run the first tick.
        wait_for(lambda: "notifier started" in process.output(), timeout=90, message="notifier")
    except AssertionError:
        process.kill()
        raise
    return process


def test_a_notifier_killed_mid_delivery_loses_nothing_and_redelivers_only_cut_off_tries(
    database, tmp_path
):
    hook = Hook(delay=ANSWER_AFTER)
    starts, kills = [], []
    loop = None
    try:
        ids = insert_notifications(database, hook.url, count=NOTIFICATIONS, timeout=TIMEOUT)
        for n in range(KILLS):
            starts.append(time.time())
            loop = loop_process(database, tmp_path, n)
            seen = len(hook.received)
            wait_for(lambda seen=seen: len(hook.received) >= seen + WORKERS + 2, timeout=30)
            loop.kill()  # SIGKILL, in the middle of WORKERS tries
            kills.append(time.time())
        loop = loop_process(database, tmp_path, KILLS)
        wait_for(
            lambda: all(state == "delivered" for state, _ in states(database).values()),
            timeout=90,
            message="every notification delivered",
        )
        assert loop.stop() == 0, loop.output()
    finally:
        if loop is not None:
            loop.kill()
        hook.close()

    assert len(ids) == NOTIFICATIONS and set(states(database)) == set(ids)
    log = delivery_rows(database)
    arrivals = {}
    for request in hook.received:
        assert request["verified"]
        arrivals.setdefault(request["delivery"], []).append(request["at"])
    assert set(arrivals) == set(ids), "a notification never reached the receiver"
    redelivered = {pk: times for pk, times in arrivals.items() if len(times) > 1}
    for pk in ids:
        # One recorded try each: a try cut off by a kill was never recorded.
        assert log[pk] == [(1, True)], (pk, log[pk], arrivals[pk])
    # Every earlier arrival was a try cut off by a kill: sent by the notifier
    # that was killed, before the kill, and never recorded. How long before
    # is no bound: the notifier's recorder writes answered tries a batch per
    # transaction, so on a loaded machine an answer can wait for its write
    # well past the receiver's ANSWER_AFTER. The receiver stamps a request a
    # moment after the bytes left, so a try sent just before a kill can carry
    # a stamp just after it; the next notifier takes far longer than
    # SENT_SLACK to start. The last notifier, stopped cleanly, sends nothing
    # twice.
    for pk, times in redelivered.items():
        for earlier in times[:-1]:
            lifetimes = zip(starts, kills, strict=True)
            assert any(start < earlier < kill + SENT_SLACK for start, kill in lifetimes), (
                pk,
                times,
                starts,
                kills,
            )
    # The kills did cut tries off (else this test proved nothing).
    assert redelivered
