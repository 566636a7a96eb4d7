"""Long-poll through the in-process API: waiting, waking, timing out."""

import asyncio
import contextlib
import datetime as dt
import threading
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.utils import timezone

from audit.models import AuditEvent, Counter
from core import db_threads
from dispatch import hub, polls
from runners.models import Runner
from scheduler.models import Execution
from tests.runners.conftest import pending


@pytest.fixture
def runner_id(api_client):
    body = {"name": "r1", "labels": ["linux"], "session": "s1"}
    return api_client.post("/v1/runners/register", body).json()["runner_id"]


def poll(api_client, runner_id, wait):
    return api_client.client.post(
        f"/v1/runners/{runner_id}/poll",
        json={"session": "s1", "wait": wait},
        headers={"Authorization": f"Bearer {api_client.secret}"},
    )


def run(scenario):
    with db_threads.steps_in_caller_thread():
        return async_to_sync(scenario)()


def test_a_waiting_poll_is_woken_by_new_work_without_waiting_out_its_wait(
    api_client, runner_id, monkeypatch, settings
):
    # The hub's safety scans made a minute apart: within the poll's 30 s
    # wait only the hint of new work makes the hub look, and a poll whose
    # wait runs out is answered with nothing.
    monkeypatch.setattr(hub, "SAFETY_SCAN_INTERVAL", 60.0)
    monkeypatch.setattr(hub, "LISTENING_SAFETY_SCAN_INTERVAL", 60.0)
    settings.CRONIQ_HEARTBEAT_INTERVAL = 60.0  # the safety net also touches runners this often

    async def scenario():
        answer = asyncio.ensure_future(poll(api_client, runner_id, 30))
        await asyncio.sleep(0.3)
        assert not answer.done()
        execution = await sync_to_async(pending)(now=timezone.now(), labels=["linux"])
        hub.hub().signal()  # what a NOTIFY (or the SQLite watcher) does
        return await answer, execution

    answer, execution = run(scenario)
    assert [e["id"] for e in answer.json()["executions"]] == [execution.pk]


def test_work_claimed_ahead_of_its_instant_is_answered_at_the_instant(
    api_client, runner_id, monkeypatch
):
    """The hub claims work CLAIM_AHEAD before it is ready; the runner must
    not have it before its run_after."""
    # A wider lead than production's, so that a busy machine still claims
    # before the instant: the test is about what happens to a claim made ahead.
    # Two seconds between the claim and the instant: a loaded CI machine took
    # more than the half second there was to claim.
    monkeypatch.setattr(hub, "CLAIM_AHEAD", 4.0)
    instant = timezone.now() + dt.timedelta(seconds=hub.CLAIM_AHEAD / 2)
    execution = pending(now=instant, labels=["linux"])

    async def scenario():
        answer = await poll(api_client, runner_id, 5)
        answered_at = timezone.now()
        await hub.hub().flush_latencies()  # what the hub does within LATENCY_FLUSH_DELAY
        return answer, answered_at

    answer, answered_at = run(scenario)
    assert [e["id"] for e in answer.json()["executions"]] == [execution.pk]
    assert answered_at >= instant
    execution.refresh_from_db()
    claimed = execution.lease_expires_at - dt.timedelta(seconds=settings.CRONIQ_LEASE_TTL)
    assert claimed < instant  # the claim was done ahead...
    assert execution.claimed_at == instant  # ...and it started at its instant
    # Its dispatch latency runs from the instant to the answer leaving, not
    # to the claim ahead of it (which would be 0 by construction).
    assert Counter.objects.value_of("croniq_dispatch_latency_seconds__count") == 1
    waited_us = Counter.objects.value_of("croniq_dispatch_latency_seconds__sum_us")
    assert 0 < waited_us <= (answered_at - instant).total_seconds() * 1_000_000


def test_work_the_runner_cannot_run_does_not_end_its_wait(api_client, runner_id):
    wait = 3.0

    async def scenario():
        started = time.monotonic()
        answer = asyncio.ensure_future(poll(api_client, runner_id, wait))
        await asyncio.sleep(0.2)
        await sync_to_async(pending)(now=timezone.now(), labels=["windows"])
        hub.hub().signal()
        result = await answer
        return result, time.monotonic() - started, len(hub.hub().waiters)

    answer, took, waiters = run(scenario)
    assert answer.json() == {"executions": []}
    # The whole wait, counted from before the poll: a signal that ended it
    # would answer within a fraction of it, while a busy machine's slow
    # set-up only makes the answer later.
    assert took > wait - 0.1
    assert waiters == 0


def test_a_poll_that_waits_in_vain_still_counts_as_a_heartbeat(api_client, runner_id):
    before = timezone.now() - dt.timedelta(minutes=1)
    Runner.objects.filter(pk=runner_id).update(last_seen_at=before)

    async def scenario():
        return await poll(api_client, runner_id, 0.3)

    assert run(scenario).json() == {"executions": []}
    assert Runner.objects.get(pk=runner_id).last_seen_at > before


def test_a_draining_runner_waits_out_its_poll_with_nothing(api_client, runner_id):
    Runner.objects.filter(pk=runner_id).update(state=Runner.DRAINING)
    pending(now=timezone.now(), labels=["linux"])

    async def scenario():
        started = time.monotonic()
        answer = await poll(api_client, runner_id, 0.3)
        return answer, time.monotonic() - started

    answer, took = run(scenario)
    assert answer.json() == {"executions": []}
    assert took >= 0.3


def test_a_poll_asking_for_nothing_gets_nothing(api_client, runner_id):
    pending(now=timezone.now(), labels=["linux"])

    async def scenario():
        return await api_client.client.post(
            f"/v1/runners/{runner_id}/poll",
            json={"session": "s1", "wait": 0.2, "capacity": 0},
            headers={"Authorization": f"Bearer {api_client.secret}"},
        )

    assert run(scenario).json() == {"executions": []}


def test_waiting_polls_keep_their_runner_online(db, runner_id):
    Runner.objects.filter(pk=runner_id).update(state=Runner.OFFLINE)
    before = Runner.objects.get(pk=runner_id).last_seen_at
    hub.touch_runners({runner_id}, before + dt.timedelta(seconds=10))
    runner = Runner.objects.get(pk=runner_id)
    assert runner.state == Runner.ONLINE
    assert runner.last_seen_at == before + dt.timedelta(seconds=10)


# -- a runner that hangs up after work was claimed for it -------------------


def state_of(pk):
    return Execution.objects.get(pk=pk).state


async def hung_up(answer):
    """Cancel a poll as the ASGI handler does when its runner hangs up."""
    answer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await answer


async def handed_back(pk, timeout=5):
    deadline = time.monotonic() + timeout
    while await sync_to_async(state_of)(pk) != Execution.PENDING:
        assert time.monotonic() < deadline, "the work was not handed back"
        await asyncio.sleep(0.01)


def assert_handed_back_once(execution):
    execution.refresh_from_db()
    assert (execution.state, execution.runner, execution.attempt) == (Execution.PENDING, None, 1)
    assert AuditEvent.objects.filter(action="execution.handed_back").count() == 1


def test_work_claimed_by_the_first_step_of_a_poll_whose_runner_hung_up_goes_back(
    api_client, runner_id, monkeypatch
):
    """Cancelling the poll cannot stop its database step's thread: the claim
    commits, and what it claimed goes back instead of waiting for the lease."""
    execution = pending(now=timezone.now() - dt.timedelta(seconds=1), labels=["linux"])
    claimed, cancelled = threading.Event(), threading.Event()
    first_poll = polls.first_poll

    def first_poll_then_hang_up(*args):
        result = first_poll(*args)
        claimed.set()
        cancelled.wait(5)  # the runner hangs up while this step is under way
        return result

    monkeypatch.setattr(polls, "first_poll", first_poll_then_hang_up)

    async def scenario():
        answer = asyncio.ensure_future(poll(api_client, runner_id, 10))
        while not claimed.is_set():
            await asyncio.sleep(0.005)
        await hung_up(answer)
        cancelled.set()
        await handed_back(execution.pk)

    run(scenario)
    assert_handed_back_once(execution)


def test_work_the_hub_claims_for_a_poll_whose_runner_hangs_up_meanwhile_goes_back(
    api_client, runner_id
):
    async def scenario():
        answer = asyncio.ensure_future(poll(api_client, runner_id, 10))
        current = hub.hub()
        while not current.waiters:
            await asyncio.sleep(0.005)
        [waiter] = current.waiters
        execution = await sync_to_async(pending)(now=timezone.now(), labels=["linux"])
        current.signal()
        while not waiter.serving:  # a step is claiming for this poll
            await asyncio.sleep(0)
        await hung_up(answer)
        await handed_back(execution.pk)
        return execution

    assert_handed_back_once(run(scenario))


def test_work_held_for_its_instant_goes_back_when_the_runner_hangs_up_before_it(
    api_client, runner_id, monkeypatch
):
    # Claim well ahead, so the hang-up surely falls inside the hold.
    monkeypatch.setattr(hub, "CLAIM_AHEAD", 3.0)
    instant = timezone.now() + dt.timedelta(seconds=2)
    execution = pending(now=instant, labels=["linux"])

    async def scenario():
        answer = asyncio.ensure_future(poll(api_client, runner_id, 10))
        while await sync_to_async(state_of)(execution.pk) != Execution.RUNNING:
            await asyncio.sleep(0.01)
        await hung_up(answer)
        await handed_back(execution.pk)
        return timezone.now()

    assert run(scenario) < instant  # given back before its instant: nothing ran late
    assert_handed_back_once(execution)
