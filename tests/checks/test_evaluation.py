"""The loop's check step (checks.evaluation) and ping retention
(checks.retention), at fixed instants on the database."""

import threading
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.apps import apps

from checks import evaluation, pings, retention, states
from checks.models import Check, Ping
from notifications.models import Event
from scheduler.firing.steps import collect
from tests.checks.factories import CheckFactory

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def ping(check: Check, when: datetime, kind: str = states.SUCCESS, **fields) -> str:
    return pings.record(pings.Received(token=check.token, kind=kind, at=when, **fields))


def state_of(check: Check) -> str:
    check.refresh_from_db()
    return check.state


def test_an_up_check_goes_late_when_due_then_down_after_its_grace():
    check = CheckFactory(period=3600, grace=300)
    ping(check, T0)
    assert evaluation.evaluate(at(59.9)) == 0
    assert state_of(check) == states.UP
    assert evaluation.evaluate(at(60)) == 1
    assert state_of(check) == states.LATE
    assert not Event.objects.exists()  # late tells nobody
    assert evaluation.evaluate(at(64)) == 0
    assert evaluation.evaluate(at(65)) == 1
    assert state_of(check) == states.DOWN
    assert check.down_at is None
    [event] = Event.objects.all()
    assert (event.name, event.at) == ("check.down", at(65))
    assert event.data["check"] == {
        "name": check.name,
        "project": "default",
        "state": "down",
        "last_ping_at": T0.isoformat(),
    }
    assert evaluation.evaluate(at(500)) == 0  # down stays down, told once
    assert Event.objects.count() == 1


def test_a_check_silent_past_both_deadlines_goes_straight_down_once():
    check = CheckFactory(period=3600, grace=300)
    ping(check, T0)
    assert evaluation.evaluate(at(120)) == 1
    assert state_of(check) == states.DOWN
    assert Event.objects.get().name == "check.down"


def test_the_step_agrees_with_the_state_machine():
    """Each check as `states.on_tick` says, whatever its deadlines."""
    made = []
    for minutes in range(0, 130, 7):
        check = CheckFactory(period=3600, grace=600)
        ping(check, at(-minutes))
        made.append(Check.objects.get(pk=check.pk))
    evaluation.evaluate(T0)
    for before in made:
        assert state_of(before) == states.on_tick(before.status(), T0).status.state


@pytest.mark.parametrize("state", [states.NEW, states.DOWN, states.PAUSED])
def test_checks_without_deadlines_are_left_alone(state):
    check = CheckFactory(state=state, next_expected_at=at(-600), down_at=at(-500))
    assert evaluation.evaluate(T0) == 0
    assert state_of(check) == state


def test_a_quiet_pass_writes_nothing(django_assert_num_queries):
    check = CheckFactory()
    ping(check, T0)
    with django_assert_num_queries(2):  # two index probes, no transaction
        assert evaluation.evaluate(at(1)) == 0


def test_a_ping_after_down_brings_it_up_and_the_loop_late_again_later():
    check = CheckFactory(period=3600, grace=300)
    ping(check, T0)
    evaluation.evaluate(at(70))
    ping(check, at(80))
    assert state_of(check) == states.UP
    assert [e.name for e in Event.objects.order_by("id")] == ["check.down", "check.up"]
    assert evaluation.evaluate(at(140)) == 1
    assert state_of(check) == states.LATE


def test_a_cron_check_is_late_at_its_next_instant():
    check = CheckFactory(period=None, schedule="*/15 * * * *", grace=60)
    ping(check, at(1))
    check.refresh_from_db()
    assert check.next_expected_at == at(15)
    evaluation.evaluate(at(15))
    assert state_of(check) == states.LATE
    evaluation.evaluate(at(16))
    assert state_of(check) == states.DOWN


def test_the_loop_runs_the_check_steps():
    names = [step.name for step in collect(loop=SimpleNamespace(fire=None))]
    assert {"checks", "check_pings_pruned"} <= set(names)
    config = apps.get_app_config("checks")
    steps = {step.name: step for step in config.loop_steps(None)}
    assert steps["checks"].run is evaluation.evaluate
    assert steps["check_pings_pruned"].run is retention.prune


# -- retention -----------------------------------------------------------------


def test_each_check_keeps_its_last_pings(settings):
    settings.CRONIQ_CHECK_PINGS_KEPT = 3
    busy, quiet = CheckFactory(), CheckFactory()
    for n in range(5):
        ping(busy, at(n))
    for n in range(2):
        ping(quiet, at(n))
    assert retention.prune(at(10)) == 1
    assert list(busy.pings.order_by("n").values_list("n", flat=True)) == [3, 4, 5]
    assert quiet.pings.count() == 2
    assert retention.prune(at(11)) == 0  # nothing more: the row says so
    ping(busy, at(12))
    assert retention.prune(at(13)) == 1
    assert list(busy.pings.order_by("n").values_list("n", flat=True)) == [4, 5, 6]


def test_a_pass_with_nothing_to_prune_reads_one_query(settings, django_assert_num_queries):
    settings.CRONIQ_CHECK_PINGS_KEPT = 3
    check = CheckFactory()
    for n in range(3):
        ping(check, at(n))
    with django_assert_num_queries(1):
        assert retention.prune(at(5)) == 0
    assert Ping.objects.count() == 3


def test_a_pass_moves_at_most_a_batch_earliest_first_and_each_moved_check_has_one_event(
    monkeypatch,
):
    monkeypatch.setattr(evaluation, "BATCH", 2)
    # Made in an order other than their deadlines': the batch follows down_at.
    for name, minutes in [("c", 3), ("a", 1), ("e", 5), ("b", 2), ("d", 4)]:
        ping(CheckFactory(name=name, period=60, grace=60 * minutes), T0)
    down = Check.objects.filter(state=states.DOWN).order_by("name")
    passes = []
    while moved := evaluation.evaluate(at(60)):
        passes.append((moved, list(down.values_list("name", flat=True))))
    assert passes == [
        (2 + 3, ["a", "b"]),  # and the three others late
        (2, ["a", "b", "c", "d"]),
        (1, ["a", "b", "c", "d", "e"]),
    ]
    named = [event.data["check"]["name"] for event in Event.objects.order_by("id")]
    assert sorted(named) == ["a", "b", "c", "d", "e"]


@pytest.mark.django_db(transaction=True)
def test_a_check_another_transaction_holds_is_left_to_it_on_postgresql():
    """Two loops (an old one still draining while a new one starts) never
    both move a check: the rows another transaction locked are skipped,
    and no event is written for them."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; SQLite's writers take turns")
    held, free = CheckFactory(name="held", period=60), CheckFactory(name="free", period=60)
    ping(held, T0)
    ping(free, T0)
    assert evaluation.evaluate(at(1.5)) == 2  # both late: going down is what is tested
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        from django.db import connections, transaction

        try:
            with transaction.atomic():
                Check.objects.select_for_update().get(pk=held.pk)
                locked.set()
                release.wait(10)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        assert evaluation.evaluate(at(10)) == 1
    finally:
        release.set()
        holder.join(10)
    assert (state_of(held), state_of(free)) == (states.LATE, states.DOWN)
    assert [event.data["check"]["name"] for event in Event.objects.all()] == ["free"]
    assert evaluation.evaluate(at(10)) == 1  # the lock gone, the next pass takes it
    assert state_of(held) == states.DOWN
