"""The new-work hint on PostgreSQL rides in the transaction that makes the
work: sent at its commit, dropped by its rollback, no round trip after it."""

import datetime as dt

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from audit import mark_tick
from runners.hub import listen_params
from runners.notify import CHANNEL, notify_new_work
from scheduler import ticks
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
