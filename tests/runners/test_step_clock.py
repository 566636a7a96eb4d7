"""A runner call's database step reads the clock when it runs, not when it
was queued: a step can wait seconds for its thread (a connection checked
against a primary that stopped answering), and a lease stamped from the
instant it was queued would lose that wait."""

import asyncio
import contextlib
import datetime as dt
import threading

import pytest
from django.conf import settings
from django.utils import timezone
from ninja.testing import TestAsyncClient

from core import db_threads
from croniq_project.api import api
from dispatch.hub import Hub, Waiter
from scheduler.models import Execution
from tests.factories import RunnerFactory
from tests.runners.conftest import pending

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.asynccontextmanager
async def lane_held(lane):
    """Every thread of `lane` busy until the block ends; yields a coroutine
    function that waits until a step is queued behind them, frees the
    threads and returns the instant it did."""
    release = threading.Event()
    started = threading.Semaphore(0)
    pool = db_threads.executor(lane)
    loop = asyncio.get_running_loop()
    _, threads = db_threads.pool_for(lane)

    def hold():
        started.release()
        release.wait(10)

    busy = [loop.run_in_executor(pool, hold) for _ in range(threads)]

    async def free_after_next_step():
        for _ in range(threads):
            await loop.run_in_executor(None, started.acquire)
        while pool._work_queue.qsize() == 0:
            await asyncio.sleep(0.001)
        freed_at = timezone.now()
        release.set()
        return freed_at

    try:
        yield free_after_next_step
    finally:
        release.set()
        await asyncio.gather(*busy)


def lease_of(execution_id):
    return Execution.objects.get(pk=execution_id).lease_expires_at


def ttl():
    return dt.timedelta(seconds=settings.CRONIQ_LEASE_TTL)


def test_a_claim_for_waiting_polls_that_waited_for_its_thread_leases_from_when_it_ran():
    execution = pending(now=timezone.now() - dt.timedelta(seconds=1))
    runner = RunnerFactory(session="s1")

    async def scenario():
        hub = Hub(asyncio.get_running_loop())
        waiter = Waiter(hub.loop, runner.pk, runner.token, "s1", None)
        hub.waiters[waiter] = None
        async with lane_held(db_threads.HUB) as free_after_next_step:
            scan = asyncio.ensure_future(hub.scan())
            freed_at = await free_after_next_step()
            await scan
        return freed_at, waiter.future.result()

    freed_at, handed = asyncio.run(scenario())
    assert [a["id"] for a in handed.assignments] == [execution.pk]
    assert lease_of(execution.pk) >= freed_at + ttl()
    assert handed.assignments[0]["lease_expires_at"] >= freed_at + ttl()


def post(path, body, secret):
    """A runner call whose steps run in the database threads (`api_client`'s
    run on the test's thread)."""
    client = TestAsyncClient(api)
    return client.post(path, json=body, headers={"Authorization": f"Bearer {secret}"})


@pytest.fixture
def runner_id(api_client):
    answer = api_client.post("/v1/runners/register", {"name": "r1", "session": "s1"})
    assert answer.status_code == 200, answer.content
    return answer.json()["runner_id"]


def test_a_poll_that_waited_for_its_thread_leases_from_when_it_ran(runner_id, secret):
    execution = pending(now=timezone.now() - dt.timedelta(seconds=1))

    async def scenario():
        async with lane_held(db_threads.DISPATCH) as free_after_next_step:
            poll = asyncio.ensure_future(
                post(f"/v1/runners/{runner_id}/poll", {"session": "s1", "wait": 0}, secret)
            )
            freed_at = await free_after_next_step()
            return freed_at, await poll

    freed_at, answer = asyncio.run(scenario())
    assert answer.status_code == 200, answer.content
    assert [a["id"] for a in answer.json()["executions"]] == [execution.pk]
    assert lease_of(execution.pk) >= freed_at + ttl()


def test_a_heartbeat_that_waited_for_its_thread_renews_from_when_it_ran(
    runner_id, secret, api_client
):
    execution = pending(now=timezone.now() - dt.timedelta(seconds=1))
    polled = api_client.post(f"/v1/runners/{runner_id}/poll", {"session": "s1"})
    [held] = polled.json()["executions"]
    assert held["id"] == execution.pk
    body = {"session": "s1", "executions": [{"id": held["id"], "lease": held["lease"]}]}

    async def scenario():
        async with lane_held(db_threads.CALLS) as free_after_next_step:
            beat = asyncio.ensure_future(post(f"/v1/runners/{runner_id}/heartbeat", body, secret))
            freed_at = await free_after_next_step()
            return freed_at, await beat

    freed_at, answer = asyncio.run(scenario())
    assert answer.status_code == 200, answer.content
    assert answer.json()["renewed"] == [execution.pk]
    assert lease_of(execution.pk) >= freed_at + ttl()
