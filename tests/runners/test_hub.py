import asyncio
import datetime as dt

import pytest

from runners.hub import Hub, Waiter, pending_summary
from tests.runners.conftest import NOW, pending


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def waiting(hub, labels, capacity=1, runner_id=1):
    waiter = Waiter(runner_id, labels, capacity)
    hub.waiters[waiter] = None
    return waiter


def woken(*waiters):
    return [w.event.is_set() for w in waiters]


def test_it_wakes_only_waiters_whose_labels_fit_the_ready_work(loop):
    hub = Hub(loop)
    windows = waiting(hub, ["windows"])
    linux = waiting(hub, ["linux"])
    gpu = waiting(hub, ["gpu", "linux"])
    hub.wake_for({frozenset(["gpu"]): 1})
    assert woken(windows, linux, gpu) == [False, False, True]


def test_it_wakes_as_many_waiters_as_there_is_work_longest_waiting_first(loop):
    hub = Hub(loop)
    first, second, third = (waiting(hub, ["linux"]) for _ in range(3))
    hub.wake_for({frozenset(): 2})
    assert woken(first, second, third) == [True, True, False]


def test_a_waiter_with_capacity_takes_a_share_of_the_work(loop):
    hub = Hub(loop)
    big = waiting(hub, ["linux"], capacity=3)
    small = waiting(hub, ["linux"])
    hub.wake_for({frozenset(["linux"]): 3})
    assert woken(big, small) == [True, False]
    hub.wake_for({frozenset(["linux"]): 4})
    assert woken(big, small) == [True, True]


def test_an_already_woken_waiter_does_not_take_a_share_again(loop):
    hub = Hub(loop)
    first, second = waiting(hub, []), waiting(hub, [])
    first.event.set()
    hub.wake_for({frozenset(): 1})
    assert woken(first, second) == [True, True]


def test_nothing_ready_wakes_nobody(loop):
    hub = Hub(loop)
    only = waiting(hub, ["linux"])
    hub.wake_for({})
    hub.wake_for({frozenset(["linux"]): 0})
    assert woken(only) == [False]


def test_the_summary_groups_ready_work_by_labels_and_finds_the_next_instant(db):
    pending(now=NOW - dt.timedelta(seconds=1), labels=["b", "a"])
    pending(now=NOW, labels=["a", "b"])
    pending(now=NOW, labels=[])
    pending(now=NOW + dt.timedelta(seconds=9), labels=["a"])
    pending(now=NOW + dt.timedelta(seconds=4), labels=["a"])
    ready, upcoming = pending_summary(NOW)
    assert ready == {frozenset(["a", "b"]): 2, frozenset(): 1}
    assert upcoming == NOW + dt.timedelta(seconds=4)


def test_the_hub_rescans_when_the_next_pending_execution_becomes_ready(loop):
    hub = Hub(loop)
    hub.wake_at(NOW + dt.timedelta(seconds=0.05), NOW)
    loop.run_until_complete(asyncio.sleep(0.1))
    assert hub.scan_requested.is_set()
