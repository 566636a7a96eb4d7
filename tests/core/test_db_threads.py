import asyncio
import threading
import time

import pytest
from django.db import connection

from core import db_threads


def live_backends(pids):
    """Which of the backends `pids` are still connected."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s)", [list(pids)])
        return {pid for (pid,) in cursor.fetchall()}


def backend_pid():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


async def calls(fn, lane, count):
    run = {
        "calls": db_threads.run_db,
        "dispatch": db_threads.run_dispatch,
        "hub": db_threads.run_hub,
    }[lane]
    return await asyncio.gather(*(run(fn) for _ in range(count)))


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    "connection.vendor != 'postgresql'",
    reason="Django never closes the SQLite test database's in-memory connection",
)
def test_every_database_thread_closes_its_connection():
    # The suite calls this before it drops its database: PostgreSQL refuses
    # to drop a database that a thread's connection still uses.
    # Only these threads' own backends are watched: another test's server
    # process may still be hanging up on this database.
    threads = set()
    for lane, count in (("calls", 40), ("dispatch", 8), ("hub", 2)):
        threads |= set(asyncio.run(calls(backend_pid, lane, count)))
    assert len(threads) >= 3 and backend_pid() not in threads
    db_threads.close_connections()
    # A backend ends a moment after its client hangs up.
    deadline = time.monotonic() + 5
    while live_backends(threads) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert live_backends(threads) == set()


LANES = {
    "calls": (db_threads.run_db, db_threads.DB_THREADS),
    "dispatch": (db_threads.run_dispatch, db_threads.DISPATCH_THREADS),
    "hub": (db_threads.run_hub, db_threads.HUB_THREADS),
}


@pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="SQLite runs every step in its one thread"
)
@pytest.mark.parametrize(
    "busy, claim",
    [
        # A burst of finishes, logs and heartbeats takes every calls thread.
        ("calls", "dispatch"),
        # Runners polling again all at once: their first steps take every
        # dispatch thread, and the hub claims for its waiting polls.
        ("dispatch", "hub"),
    ],
)
def test_claims_do_not_queue_behind_a_busy_lane(transactional_db, busy, claim):
    release = threading.Event()
    occupy, threads = LANES[busy]

    async def scenario():
        taken = [
            asyncio.ensure_future(occupy(release.wait, 10)) for _ in range(threads["postgresql"])
        ]
        await asyncio.sleep(0.2)  # every thread of the busy lane is taken
        try:
            return await asyncio.wait_for(LANES[claim][0](lambda: "claimed"), timeout=5)
        finally:
            release.set()
            await asyncio.gather(*taken)

    try:
        assert asyncio.run(scenario()) == "claimed"
    finally:
        release.set()
