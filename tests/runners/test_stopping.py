"""A stopping web process answers its long-polls at once (docs/design.md §4,
`stopping`; §16), through the in-process API; and how the stop is learnt:
the lifespan chains a handler in front of the server's for SIGTERM."""

import asyncio
import signal
import threading
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core import db_threads
from croniq_project import lifespan
from dispatch import hub
from runners.models import Runner
from tests.runners.conftest import pending


@pytest.fixture(autouse=True)
def not_stopping(monkeypatch):
    """The stop is for good in a process; each test starts before it."""
    monkeypatch.setattr(hub, "_stopping", False)


@pytest.fixture
def runner_id(api_client):
    body = {"name": "r1", "labels": ["linux"], "session": "s1"}
    return api_client.post("/v1/runners/register", body).json()["runner_id"]


async def poll(api_client, runner_id, wait):
    return await api_client.client.post(
        f"/v1/runners/{runner_id}/poll",
        json={"session": "s1", "wait": wait, "capacity": 1},
        headers={"Authorization": f"Bearer {api_client.secret}"},
    )


def run(scenario, *args):
    with db_threads.steps_in_caller_thread():
        return async_to_sync(scenario)(*args)


# What the polls ask to wait: the most the API allows. A poll answered within
# half of it was answered by the stop.
WAIT = 60


async def stopped_while_waiting(api_client, runner_id):
    """A poll's answer, and seconds from the stop to it, stopped once it waits."""
    answer = asyncio.ensure_future(poll(api_client, runner_id, WAIT))
    while not hub.hub().waiters:
        await asyncio.sleep(0.01)
    started = time.monotonic()
    hub.stop_waiting()
    return await answer, time.monotonic() - started


def test_a_waiting_poll_is_answered_at_once_with_nothing_and_told_the_server_stops(
    api_client, runner_id
):
    answer, took = run(stopped_while_waiting, api_client, runner_id)
    assert answer.status_code == 200
    assert answer.json() == {"executions": [], "stopping": True}
    assert took < WAIT / 2  # not the minute it asked to wait


def test_a_drained_runners_poll_ends_at_the_stop_too(api_client, runner_id, monkeypatch):
    Runner.objects.filter(pk=runner_id).update(drained=True)
    idle = hub.Hub.idle

    async def scenario():
        idling = asyncio.Event()

        async def seen_idling(current, seconds):
            idling.set()
            await idle(current, seconds)

        monkeypatch.setattr(hub.Hub, "idle", seen_idling)
        answer = asyncio.ensure_future(poll(api_client, runner_id, WAIT))
        await idling.wait()  # its first step found it drained: it takes nothing
        started = time.monotonic()
        hub.stop_waiting()
        return await answer, time.monotonic() - started

    answer, took = run(scenario)
    assert answer.json() == {"executions": [], "stopping": True}
    assert took < WAIT / 2


def test_a_poll_arriving_while_stopping_is_answered_at_once_without_the_database(
    api_client, runner_id
):
    pending(now=timezone.now(), labels=["linux"])  # not handed out by a stopping process
    hub.stop_waiting()
    with CaptureQueriesContext(connection) as queries:
        answer = run(poll, api_client, runner_id, 30)
    assert answer.json() == {"executions": [], "stopping": True}
    assert len(queries) == 0


def test_work_a_claim_under_way_at_the_stop_brings_is_answered_not_dropped(
    api_client, runner_id, monkeypatch
):
    """The stop comes while the hub's claim for a waiting poll runs: the
    poll is answered with what that claim took for it."""
    serve = hub.serve_from_start

    def serve_as_the_stop_comes(*args):
        hub.stop_waiting()
        time.sleep(0.2)  # the event loop runs the stop meanwhile
        # Reads the clock now: a scan begun before the test's work was
        # made (the hub's safety net) still claims it.
        return serve(*args)

    async def scenario():
        answer = asyncio.ensure_future(poll(api_client, runner_id, 30))
        while not hub.hub().waiters:
            await asyncio.sleep(0.01)
        monkeypatch.setattr(hub, "serve_from_start", serve_as_the_stop_comes)
        execution = await sync_to_async(pending)(now=timezone.now(), labels=["linux"])
        hub.hub().signal()
        return await answer, execution

    answer, execution = run(scenario)
    body = answer.json()
    assert [e["id"] for e in body["executions"]] == [execution.pk]
    assert body["stopping"] is True


def test_answers_say_nothing_of_stopping_while_the_process_runs(api_client, runner_id):
    assert run(poll, api_client, runner_id, 0).json() == {"executions": []}


# -- how the process learns it is stopping --------------------------------


@pytest.fixture
def server_handlers():
    """A server's handlers for SIGTERM and SIGINT (what uvicorn installs),
    recording the signals they get; the previous ones are put back after."""
    got = []
    saved = {signum: signal.getsignal(signum) for signum in lifespan.STOP_SIGNALS}
    for signum in lifespan.STOP_SIGNALS:
        signal.signal(signum, lambda signum, frame: got.append(signum))
    yield got
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_the_first_stop_signal_stops_the_polls_and_every_one_still_reaches_the_server(
    server_handlers,
):
    stops = []
    lifespan.chain_stop_signals(lambda: stops.append(time.monotonic()))
    signal.raise_signal(signal.SIGTERM)
    signal.raise_signal(signal.SIGINT)  # a second signal: the server's to judge
    assert len(stops) == 1
    assert server_handlers == [signal.SIGTERM, signal.SIGINT]


def test_the_lifespan_chains_at_startup_and_completes_both_phases(server_handlers):
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent = []

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message["type"])

    asyncio.run(lifespan.lifespan({"type": "lifespan"}, receive, send))
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    signal.raise_signal(signal.SIGTERM)
    assert hub.stopping()
    assert server_handlers == [signal.SIGTERM]


def test_a_server_in_another_thread_gets_no_chained_handler(server_handlers):
    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=lifespan.chain_stop_signals, args=(lambda: None,))
    thread.start()
    thread.join()
    assert signal.getsignal(signal.SIGTERM) is before
