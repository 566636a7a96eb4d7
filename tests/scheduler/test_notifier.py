"""New work reaches whoever hands it out through `scheduler.firing.notifier`."""

import datetime as dt

import pytest

from scheduler.firing import notifier, ticks
from scheduler.models import Execution
from scheduler.runs import operations
from tests.factories import ExecutionFactory, JobFactory

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def heard(monkeypatch):
    """A listener registered for one test; the list of its calls."""
    calls = []
    monkeypatch.setattr(notifier, "_listeners", list(notifier._listeners))
    notifier.on_new_work(lambda: calls.append(1))
    return calls


def test_runners_registers_its_wake_up_when_it_starts():
    from dispatch.notify import notify_new_work

    assert notify_new_work in notifier._listeners


def test_a_listener_registered_twice_is_called_once(monkeypatch):
    calls = []
    monkeypatch.setattr(notifier, "_listeners", [])

    def listener():
        calls.append(1)

    notifier.on_new_work(listener)
    notifier.on_new_work(listener)
    notifier.new_work()

    assert calls == [1]


@pytest.mark.django_db
def test_firing_tells_the_listeners_and_a_tick_with_nothing_new_does_not(heard):
    JobFactory(next_run_at=T0)

    assert ticks.trigger_due(T0) == 1
    assert heard == [1]
    assert ticks.trigger_due(T0) == 0
    assert heard == [1]


@pytest.mark.django_db(transaction=True)
def test_an_operator_retry_tells_the_listeners_after_its_commit(heard):
    failed = ExecutionFactory(
        job=JobFactory(next_run_at=None), state=Execution.FAILED, finished_at=T0
    )

    operations.retry(failed, T0, actor=None)

    assert heard == [1]
