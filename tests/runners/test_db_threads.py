import asyncio
import time

import pytest
from django.db import connection

from runners import db_threads


def backends_of_this_database():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def query():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


async def calls(fn, lane, count):
    run = {"calls": db_threads.run_db, "hub": db_threads.run_hub}[lane]
    await asyncio.gather(*(run(fn) for _ in range(count)))


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    "connection.vendor != 'postgresql'",
    reason="Django never closes the SQLite test database's in-memory connection",
)
def test_every_database_thread_closes_its_connection():
    # The suite calls this before it drops its database: PostgreSQL refuses
    # to drop a database that a thread's connection still uses.
    asyncio.run(calls(query, "calls", 40))
    asyncio.run(calls(query, "hub", 2))
    assert backends_of_this_database() >= 2
    db_threads.close_connections()
    # A backend ends a moment after its client hangs up.
    deadline = time.monotonic() + 5
    while backends_of_this_database() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert backends_of_this_database() == 0
