"""Pings recorded together (checks.ping_batches, checks.pings.record_all):
the pings that wait while a transaction commits go in the next one, each
answered as if recorded alone."""

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from checks import ping_batches, pings, states
from checks.models import Check

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def received(token, kind=states.SUCCESS, at=NOW, **fields):
    return pings.Received(token=token, kind=kind, at=at, **fields)


def test_pings_of_one_check_in_one_batch_move_it_one_after_the_other():
    check = Check.objects.create(name="backup", period=3600, grace=60)
    answers = pings.record_all(
        [
            received(check.token, states.START, NOW),
            received(check.token, states.SUCCESS, NOW + timedelta(seconds=30), body=b"done"),
            received(check.token, states.FAIL, NOW + timedelta(seconds=40)),
        ]
    )
    assert answers == [pings.FOUND] * 3
    check.refresh_from_db()
    assert (check.n_pings, check.state, check.last_ping_at) == (
        3,
        states.DOWN,
        NOW + timedelta(seconds=40),
    )
    rows = list(check.pings.order_by("n").values_list("n", "kind", "duration", "body"))
    assert rows == [
        (1, states.START, None, ""),
        (2, states.SUCCESS, timedelta(seconds=30), "done"),
        (3, states.FAIL, None, ""),  # the start was the run the success ended
    ]


def test_each_ping_of_a_batch_gets_its_own_answer_in_order(settings):
    settings.CRONIQ_PING_LIMIT = 2
    first = Check.objects.create(name="first", period=3600)
    second = Check.objects.create(name="second", period=3600)
    batch = [
        received(second.token),
        received("no-such-token"),
        received(first.token),
        received(second.token),
        received(second.token),  # its third in the window: over the limit of 2
        received(first.token),
    ]
    assert pings.record_all(batch) == [
        pings.FOUND,
        pings.NOT_FOUND,
        pings.FOUND,
        pings.FOUND,
        pings.LIMITED,
        pings.FOUND,
    ]
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.n_pings, second.n_pings, second.rate_count) == (2, 2, 2)
    assert second.pings.count() == 2  # a refused ping writes nothing


def test_a_check_going_down_in_a_batch_writes_its_event_once():
    from notifications.models import Event

    check = Check.objects.create(name="backup", period=3600)
    pings.record_all([received(check.token, states.FAIL), received(check.token, states.FAIL)])
    assert Event.objects.filter(name=states.CHECK_DOWN).count() == 1


def test_pings_that_come_while_a_transaction_writes_go_in_the_next(monkeypatch):
    tokens = [Check.objects.create(name=f"c{n}", period=3600).token for n in range(20)]
    sizes = []
    record_all = pings.record_all

    def counted(batch):
        sizes.append(len(batch))
        return record_all(batch)

    monkeypatch.setattr(pings, "record_all", counted)

    async def flood():
        return await asyncio.gather(*(ping_batches.record(received(t)) for t in tokens))

    assert asyncio.run(flood()) == [pings.FOUND] * 20
    # One writer (SQLite) or a few (PostgreSQL): fewer transactions than pings.
    assert sum(sizes) == 20 and len(sizes) <= ping_batches.MOST_WRITERS + 1
    assert Check.objects.filter(n_pings=1).count() == 20


def test_a_ping_after_the_writer_ended_starts_another():
    check = Check.objects.create(name="backup", period=3600)

    async def one_by_one():
        return [await ping_batches.record(received(check.token)) for _ in range(3)]

    assert asyncio.run(one_by_one()) == [pings.FOUND] * 3
    check.refresh_from_db()
    assert check.n_pings == 3


def test_a_batch_that_fails_fails_each_of_its_pings():
    from django.db import DatabaseError, connection

    check = Check.objects.create(name="backup", period=3600)
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE checks_ping RENAME TO checks_ping_away")

    async def two():
        return await asyncio.gather(
            ping_batches.record(received(check.token)),
            ping_batches.record(received(check.token)),
            return_exceptions=True,
        )

    try:
        answers = asyncio.run(two())
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE checks_ping_away RENAME TO checks_ping")
    assert all(isinstance(answer, DatabaseError) for answer in answers)
    check.refresh_from_db()
    assert check.n_pings == 0
