"""scheduler.stalled, detected by the web processes: once across them all."""

import datetime as dt
import logging
import threading
import time

import pytest
from django.db import DatabaseError, connection, connections

import audit
from notifications import stall_watch
from notifications.models import Channel, Event, Rule

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def seconds(n):
    return dt.timedelta(seconds=n)


def stalls():
    return list(Event.objects.filter(name="scheduler.stalled").order_by("id"))


@pytest.fixture
def grace(settings):
    settings.CRONIQ_STALL_GRACE = 60.0
    return 60.0


@pytest.mark.django_db
def test_no_stall_while_the_loop_ticks(grace):
    assert stall_watch.check_stall(T0) is None  # never ticked: nothing to name
    audit.mark_tick(T0)
    assert stall_watch.check_stall(T0 + seconds(60)) is None
    assert stalls() == []


@pytest.mark.django_db
def test_a_stall_is_reported_once_and_a_later_one_again(grace):
    audit.mark_tick(T0)

    event = stall_watch.check_stall(T0 + seconds(61))
    assert event is not None
    assert event.key == f"scheduler.stalled:{T0.isoformat()}:60"
    assert event.at == T0 + seconds(61)
    assert event.data == {"last_tick": T0.isoformat(), "grace": 60.0, "stalled_for": 61.0}
    assert stall_watch.check_stall(T0 + seconds(71)) is None
    assert stall_watch.check_stall(T0 + seconds(3600)) is None

    # The loop came back, then stopped again: a new stall.
    back = T0 + dt.timedelta(hours=2)
    audit.mark_tick(back)
    assert stall_watch.check_stall(back + seconds(30)) is None
    again = stall_watch.check_stall(back + seconds(90))
    assert again is not None and again.data["last_tick"] == back.isoformat()
    assert [e.pk for e in stalls()] == [event.pk, again.pk]


@pytest.mark.django_db
def test_each_rule_grace_is_its_own_stall(grace):
    rule = Rule.objects.create(name="long-stall", events=["scheduler.stalled"], grace=600)
    rule.channels.add(Channel.objects.create(name="ops", kind=Channel.WEBHOOK))
    audit.mark_tick(T0)

    assert stall_watch.check_stall(T0 + seconds(61)).data["grace"] == 60.0
    assert stall_watch.check_stall(T0 + seconds(300)) is None
    assert stall_watch.check_stall(T0 + seconds(601)).data["grace"] == 600.0
    assert stall_watch.check_stall(T0 + seconds(700)) is None
    assert [e.key for e in stalls()] == [
        f"scheduler.stalled:{T0.isoformat()}:60",
        f"scheduler.stalled:{T0.isoformat()}:600",
    ]


@pytest.mark.django_db
def test_web_processes_one_after_the_other_report_one_stall(grace):
    audit.mark_tick(T0)
    found = [stall_watch.check_stall(T0 + seconds(61 + i)) for i in range(4)]
    assert [e is not None for e in found] == [True, False, False, False]
    assert len(stalls()) == 1


@pytest.mark.django_db(transaction=True)
def test_web_processes_at_once_report_one_stall(grace):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL; SQLite serialises them (test above)")
    audit.mark_tick(T0)
    racers = 4
    barrier = threading.Barrier(racers)
    results, errors = [], []

    def web_process():
        # Each thread has its own database connection, as a process would.
        try:
            barrier.wait()
            results.append(stall_watch.check_stall(T0 + seconds(61)))
        except Exception as e:  # surfaced below
            errors.append(e)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=web_process) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert sum(result is not None for result in results) == 1
    assert len(stalls()) == 1


@pytest.mark.django_db(transaction=True)
def test_the_watch_thread_survives_a_failing_check(grace, caplog):
    audit.mark_tick(T0)
    instants = iter([T0 + seconds(1), DatabaseError("the database went away")])

    def clock():
        instant = next(instants, T0 + seconds(61))
        if isinstance(instant, Exception):
            raise instant
        return instant

    watch = stall_watch.StallWatch(every=0.01, clock=clock)
    with caplog.at_level(logging.WARNING, logger="croniq.notifications.stall_watch"):
        watch.start()
        try:
            # Waited for in the log, the database read once the watch has
            # stopped: the test database is SQLite's shared in-memory one,
            # where a read while the watch's thread writes fails at once
            # ("database table is locked") instead of waiting its turn.
            wait_for(lambda: any("reported" in r.getMessage() for r in caplog.records))
        finally:
            watch.stop()
            watch.join(5)
    assert not watch.is_alive()
    assert len(stalls()) == 1
    messages = [r.getMessage() for r in caplog.records]
    [failed] = [r for r in caplog.records if r.getMessage().startswith("checking for")]
    assert failed.getMessage() == (
        "checking for a scheduler stall failed (the database went away); trying again"
    )
    assert failed.exc_info is None  # one line: no traceback while the database is away
    assert any("scheduler.stalled reported" in m for m in messages)


def test_start_starts_one_watch_per_process(monkeypatch, settings):
    settings.CRONIQ_STALL_WATCH = False
    assert stall_watch.start() is None
    settings.CRONIQ_STALL_WATCH = True
    # No database: the watch's checks are replaced by a counter.
    looks = []
    monkeypatch.setattr(stall_watch.StallWatch, "check_once", lambda self: looks.append(1))
    monkeypatch.setattr(stall_watch, "_watch", None)
    first = stall_watch.start()
    try:
        assert stall_watch.start() is first
        assert first.daemon and first.is_alive()
        wait_for(lambda: looks)
    finally:
        first.stop()
        first.join(5)


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")
