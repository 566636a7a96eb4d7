import asyncio
import datetime as dt

import pytest

from runners.hub import Hub, Waiter, choose, pending_summary, serve
from tests.runners.conftest import NOW, pending


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def waiter(loop, labels, capacity=1, claim=None):
    return Waiter(loop, 1, labels, capacity, claim)


def test_it_chooses_only_waiters_whose_labels_fit_the_ready_work(loop):
    windows, linux, gpu = (
        waiter(loop, ["windows"]),
        waiter(loop, ["linux"]),
        waiter(loop, ["gpu", "linux"]),
    )
    assert choose([windows, linux, gpu], {frozenset(["gpu"]): 1}) == [gpu]


def test_it_chooses_as_many_waiters_as_there_is_work_longest_waiting_first(loop):
    first, second, third = (waiter(loop, ["linux"]) for _ in range(3))
    assert choose([first, second, third], {frozenset(): 2}) == [first, second]


def test_a_waiter_with_capacity_takes_a_share_of_the_work(loop):
    big, small = waiter(loop, ["linux"], capacity=3), waiter(loop, ["linux"])
    assert choose([big, small], {frozenset(["linux"]): 3}) == [big]
    assert choose([big, small], {frozenset(["linux"]): 4}) == [big, small]


def test_nothing_ready_chooses_nobody(loop):
    only = waiter(loop, ["linux"])
    assert choose([only], {}) == []
    assert choose([only], {frozenset(["linux"]): 0}) == []


def test_the_summary_groups_ready_work_by_labels_and_finds_the_next_instant(db):
    pending(now=NOW - dt.timedelta(seconds=1), labels=["b", "a"])
    pending(now=NOW, labels=["a", "b"])
    pending(now=NOW, labels=[])
    pending(now=NOW + dt.timedelta(seconds=9), labels=["a"])
    pending(now=NOW + dt.timedelta(seconds=4), labels=["a"])
    ready, upcoming = pending_summary(NOW)
    assert ready == {frozenset(["a", "b"]): 2, frozenset(): 1}
    assert upcoming == NOW + dt.timedelta(seconds=4)


def test_serve_claims_for_chosen_waiters_and_hands_refusals_to_their_poll(db, loop):
    pending(now=NOW, labels=["linux"])
    pending(now=NOW, labels=["linux"])
    calls = []

    def claims(result):
        def claim(now):
            calls.append(now)
            if isinstance(result, Exception):
                raise result
            return result

        return claim

    superseded = waiter(loop, ["linux"], claim=claims(LookupError("superseded")))
    lucky = waiter(loop, ["linux"], claim=claims(["assignment"]))
    late = waiter(loop, ["linux"], claim=claims([]))
    served, upcoming = serve([superseded, lucky, late], NOW)
    assert [(w, str(o) if isinstance(o, Exception) else o) for w, o in served] == [
        (superseded, "superseded"),
        (lucky, ["assignment"]),
    ]
    assert calls == [NOW, NOW]  # two ready executions: the third waiter is not tried
    assert upcoming is None


def test_the_hub_rescans_when_the_next_pending_execution_becomes_ready(loop):
    hub = Hub(loop)
    hub.wake_at(NOW + dt.timedelta(seconds=0.05), NOW)
    loop.run_until_complete(asyncio.sleep(0.1))
    assert hub.scan_requested.is_set()
