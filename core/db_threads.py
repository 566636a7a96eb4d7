"""The threads that run runner calls' database work.

A runner call's coroutine holds no database connection: each step runs in
one of these threads (`run_db`; claims in `run_dispatch`), which keep their
connections between calls.
"""

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

# Database threads for runner calls. Each keeps its connection between calls
# (a new PostgreSQL connection costs milliseconds on every dispatch); a
# waiting poll holds none of them. SQLite takes one writer at a time anyway,
# and writers of one process that contend for its lock sleep in the busy
# handler's backoff (up to 100 ms a round): one thread queues them instead.
DB_THREADS = {"postgresql": 8, "sqlite": 1}
# PostgreSQL: claims (a poll's first look, the hub's hand-out) run in threads
# of their own, so handing out work never queues behind a burst of finishes,
# logs and heartbeats (all jobs of an instant finish at about the same
# time). SQLite keeps its one thread for everything.
DISPATCH_THREADS = {"postgresql": 2}
# PostgreSQL: the hub's claims for its waiting polls have a thread of their
# own too. When an instant's work is answered, its runners all poll again at
# once, and each poll's first step (a claim of its own) queues in the
# dispatch threads: the hub's claim for the next instant must not wait
# behind hundreds of them (bench/top_of_band.py, 500 runners).
HUB_THREADS = {"postgresql": 1}
# A connection idle this long is checked before use (the database may have
# restarted meanwhile).
IDLE_CHECK_AFTER = 5.0


T = TypeVar("T")

_executor_lock = threading.Lock()
_executors = {}  # pool name -> pool
_lane_pools = {}  # lane -> its pool (dispatch may share the calls pool)
_local = threading.local()
CALLS, DISPATCH, HUB = "calls", "dispatch", "hub"


def pool_for(lane: str) -> tuple[str, int]:
    """(pool name, threads) for a lane: dispatch and the hub share the calls
    pool where they have no threads of their own."""
    vendor = connection.vendor
    own = {DISPATCH: DISPATCH_THREADS, HUB: HUB_THREADS}.get(lane, {})
    if vendor in own:
        return lane, own[vendor]
    return CALLS, DB_THREADS.get(vendor, 4)


def executor(lane: str = CALLS) -> ThreadPoolExecutor:
    # Every runner call passes here on the event loop: no lock, and no
    # `connection` (each request's context would build a new wrapper for it).
    pool = _lane_pools.get(lane)
    if pool is None:
        name, threads = pool_for(lane)
        with _executor_lock:
            if name not in _executors:
                _executors[name] = ThreadPoolExecutor(threads, thread_name_prefix=f"croniq-{name}")
            pool = _lane_pools[lane] = _executors[name]
    return pool


def _run_in_db_thread(fn, args, kwargs):
    last = getattr(_local, "last_used", None)
    idle = last is not None and time.monotonic() - last > IDLE_CHECK_AFTER
    if idle and connection.connection is not None and not connection.is_usable():
        connection.close()
    try:
        return fn(*args, **kwargs)
    except (OperationalError, InterfaceError):
        # A broken connection must not poison this thread's next call.
        connection.close()
        raise
    finally:
        _local.last_used = time.monotonic()


# Tests that keep their data inside the test's transaction run the steps in
# the caller's thread instead (see `steps_in_caller_thread`).
_caller_thread = False


def now_at_start(fn: Callable[..., T], *args: Any) -> Callable[[], T]:
    """`fn(*args, now)`, `now` read when the step begins in its database
    thread rather than when the runner call queued it.

    A step can wait for its thread: behind other steps, or while the
    thread's idle connection is checked against a server that stopped
    answering (a lost primary: up to the connection's TCP timeout, 10 s).
    An instant read before that wait is stale by all of it, and a lease
    stamped from it ran out early: a claim answered 11 s late after a
    failover left its runner 4 s of a 15 s lease, and the run was reaped
    and run twice.
    """
    return lambda: fn(*args, timezone.now())


async def run_db(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn` in a database thread; the caller's coroutine holds no connection."""
    return await _run_in(CALLS, fn, args, kwargs)


async def run_dispatch(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`run_db` for claims: in the dispatch threads where there are some."""
    return await _run_in(DISPATCH, fn, args, kwargs)


async def run_hub(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`run_db` for the hub's claims: in its own thread where there is one."""
    return await _run_in(HUB, fn, args, kwargs)


async def _run_in(lane, fn, args, kwargs):
    if _caller_thread:
        return await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)
    loop = asyncio.get_running_loop()
    call = functools.partial(_run_in_db_thread, fn, args, kwargs)
    return await loop.run_in_executor(executor(lane), call)


@contextlib.contextmanager
def steps_in_caller_thread() -> Iterator[None]:
    """Run database steps on the thread that drives the event loop (tests)."""
    global _caller_thread
    _caller_thread = True
    try:
        yield
    finally:
        _caller_thread = False


def close_connections(timeout: float = 5.0) -> None:
    """Close the database connection of every database thread (the test
    suite, before it drops its database). Each thread closes its own: one
    task per thread, held at a barrier until all have come."""
    with _executor_lock:
        pools = list(_executors.values())
    for pool in pools:
        barrier = threading.Barrier(pool._max_workers)

        def close(barrier=barrier):
            connection.close()
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout)

        for future in [pool.submit(close) for _ in range(pool._max_workers)]:
            future.result()
