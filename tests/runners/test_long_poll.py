"""Long-poll through the in-process API: waiting, waking, timing out."""

import asyncio
import datetime as dt
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.utils import timezone

from runners import hub
from runners.models import Runner
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
    with hub.steps_in_caller_thread():
        return async_to_sync(scenario)()


def test_a_waiting_poll_is_woken_by_new_work_without_waiting_out_its_wait(api_client, runner_id):
    async def scenario():
        answer = asyncio.ensure_future(poll(api_client, runner_id, 10))
        await asyncio.sleep(0.3)
        assert not answer.done()
        execution = await sync_to_async(pending)(now=timezone.now(), labels=["linux"])
        started = time.monotonic()
        hub.hub().signal()  # what a NOTIFY (or the SQLite watcher) does
        return await answer, time.monotonic() - started, execution

    answer, took, execution = run(scenario)
    assert [e["id"] for e in answer.json()["executions"]] == [execution.pk]
    assert took < 0.75  # well inside the 1 s safety scan, even on a loaded machine


def test_work_claimed_ahead_of_its_instant_is_answered_at_the_instant(api_client, runner_id):
    """The hub claims work CLAIM_AHEAD before it is ready; the runner must
    not have it before its run_after."""
    instant = timezone.now() + dt.timedelta(seconds=hub.CLAIM_AHEAD / 2)
    execution = pending(now=instant, labels=["linux"])

    async def scenario():
        answer = await poll(api_client, runner_id, 5)
        return answer, timezone.now()

    answer, answered_at = run(scenario)
    assert [e["id"] for e in answer.json()["executions"]] == [execution.pk]
    assert answered_at >= instant
    execution.refresh_from_db()
    claimed = execution.lease_expires_at - dt.timedelta(seconds=settings.CRONIQ_LEASE_TTL)
    assert claimed < instant  # the claim was done ahead...
    assert execution.claimed_at == instant  # ...and it started at its instant


def test_work_the_runner_cannot_run_does_not_end_its_wait(api_client, runner_id):
    async def scenario():
        answer = asyncio.ensure_future(poll(api_client, runner_id, 1))
        await asyncio.sleep(0.2)
        await sync_to_async(pending)(now=timezone.now(), labels=["windows"])
        hub.hub().signal()
        started = time.monotonic()
        result = await answer
        return result, time.monotonic() - started, len(hub.hub().waiters)

    answer, took, waiters = run(scenario)
    assert answer.json() == {"executions": []}
    assert took > 0.5
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
