"""The new-work hint on PostgreSQL rides in the transaction that makes the
work: sent at its commit, dropped by its rollback, no round trip after it."""

import asyncio
import datetime as dt

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from audit import mark_tick
from core.db import listen_params
from dispatch.hub import LISTENING_SAFETY_SCAN_INTERVAL, SAFETY_SCAN_INTERVAL, Hub
from dispatch.notify import CHANNEL, notify_new_work
from scheduler.firing import ticks
from tests.factories import JobFactory

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)

pytestmark = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="LISTEN/NOTIFY is PostgreSQL's"
)


@pytest.fixture
def listener():
    """A connection of its own, listening on the new-work channel."""
    with psycopg.connect(**listen_params(), autocommit=True) as conn:
        conn.execute(f"LISTEN {CHANNEL}")
        yield conn


def heard(conn):
    return [n.channel for n in conn.notifies(timeout=0.3, stop_after=1)]


@pytest.mark.django_db(transaction=True)
def test_a_hint_made_in_a_transaction_leaves_at_its_commit(listener):
    with transaction.atomic():
        notify_new_work()
        assert heard(listener) == []

    assert heard(listener) == [CHANNEL]


@pytest.mark.django_db(transaction=True)
def test_a_hint_made_in_a_transaction_rolled_back_never_leaves(listener):
    with pytest.raises(RuntimeError), transaction.atomic():
        notify_new_work()
        raise RuntimeError("the work was not made")

    assert heard(listener) == []


@pytest.mark.django_db(transaction=True)
def test_a_firing_sends_its_hint_in_its_own_transaction(listener):
    JobFactory(next_run_at=T0)

    with CaptureQueriesContext(connection) as queries:
        assert ticks.trigger_due(T0) == 1

    statements = [q["sql"] for q in queries.captured_queries]
    assert statements.index(f"NOTIFY {CHANNEL}") < statements.index("COMMIT")
    assert statements[-1] == "COMMIT"
    assert heard(listener) == [CHANNEL]


@pytest.mark.django_db
def test_the_loops_heartbeat_is_one_statement():
    mark_tick(T0)

    with CaptureQueriesContext(connection) as queries:
        mark_tick(T0 + dt.timedelta(seconds=1))

    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["UPDATE"]


@pytest.mark.django_db(transaction=True)
def test_a_listening_hub_looks_for_lost_hints_less_often_and_again_each_second_once_it_is_cut_off(
    settings,
):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 10
    loop = asyncio.new_event_loop()
    hub = Hub(loop)
    assert hub.safety_interval() == SAFETY_SCAN_INTERVAL  # not listening yet
    listening = loop.create_task(hub.listen())

    async def until(condition):
        for _ in range(200):
            if condition():
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the hub's listener did not get there")

    try:
        loop.run_until_complete(until(lambda: hub.listening))
        assert hub.safety_interval() == LISTENING_SAFETY_SCAN_INTERVAL > SAFETY_SCAN_INTERVAL
        # A hint committed elsewhere reaches it.
        hub.scan_requested.clear()
        with psycopg.connect(**listen_params(), autocommit=True) as other:
            other.execute(f"NOTIFY {CHANNEL}")
        loop.run_until_complete(until(hub.scan_requested.is_set))
        # The database ends the hub's LISTEN session: hints may be lost
        # until it is back, so the safety net looks every second again.
        with psycopg.connect(**listen_params(), autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE query LIKE 'LISTEN %%' AND pid <> pg_backend_pid()"
                " AND datname = current_database()"
            )
        loop.run_until_complete(until(lambda: not hub.listening))
        assert hub.safety_interval() == SAFETY_SCAN_INTERVAL
        loop.run_until_complete(until(lambda: hub.listening))  # it reconnects
    finally:
        listening.cancel()
        loop.run_until_complete(asyncio.gather(listening, return_exceptions=True))
        loop.close()
