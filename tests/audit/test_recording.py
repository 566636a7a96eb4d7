"""audit.record / increment / observe / mark_tick against the database."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

import audit
from audit.models import AuditEvent, Counter, Heartbeat

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_record_with_a_counter_writes_the_event_and_moves_the_counter(db):
    audit.record(
        "execution.retry",
        at=NOW,
        data={"attempt": 2},
        counter=("croniq_retries_total", {"reason": "lost"}),
    )
    audit.record("execution.retry", at=NOW, counter=("croniq_retries_total", {"reason": "lost"}))
    event = AuditEvent.objects.first()
    assert (event.action, event.actor_kind, event.at) == ("execution.retry", "system", NOW)
    assert Counter.objects.value_of("croniq_retries_total", "reason=lost") == 2


def test_a_comma_in_a_label_value_cannot_split_the_series(db):
    audit.increment("croniq_singleton_skips_total", job="a,b")
    assert Counter.objects.get().label_dict() == {"job": "a_b"}


def test_observe_writes_one_bucket_the_count_and_the_sum_in_microseconds(db):
    audit.observe("croniq_dispatch_latency_seconds", 0.3)
    audit.observe("croniq_dispatch_latency_seconds", 0.4)
    rows = dict(Counter.objects.values_list("name", "value").filter(name__contains="__"))
    assert rows == {
        "croniq_dispatch_latency_seconds__bucket": 2,
        "croniq_dispatch_latency_seconds__count": 2,
        "croniq_dispatch_latency_seconds__sum_us": 700_000,
    }
    assert Counter.objects.get(name__endswith="__bucket").labels == "le=0.5"


def test_last_tick_is_none_until_the_loop_ticks(db):
    assert audit.last_tick() is None


def test_mark_tick_keeps_one_row_holding_the_latest_tick(db):
    audit.mark_tick(NOW - timedelta(seconds=2))
    audit.mark_tick(NOW)
    assert Heartbeat.objects.count() == 1
    assert audit.last_tick() == NOW


def test_a_series_moved_from_several_threads_is_their_sum(transactional_db):
    def bump():
        audit.increment("croniq_executions_total", 2, state="succeeded")
        connection.close()

    # One after another: each thread has its own shard all the same, and the
    # test database of SQLite (shared-cache memory) refuses concurrent
    # writers outright instead of waiting.
    for _ in range(3):
        thread = threading.Thread(target=bump)
        thread.start()
        thread.join()
    audit.increment("croniq_executions_total", 1, state="succeeded")
    rows = Counter.objects.filter(name="croniq_executions_total")
    assert rows.count() >= 3  # the threads have shards of their own
    assert Counter.objects.value_of("croniq_executions_total", "state=succeeded") == 7
    assert Counter.objects.totals() == [("croniq_executions_total", "state=succeeded", 7)]


@pytest.mark.django_db(transaction=True)
def test_an_event_and_its_counter_are_written_together_or_not_at_all(monkeypatch):
    from django.db import OperationalError

    from audit import recording
    from audit.models import AuditEvent, Counter

    def database_gone(*args, **kwargs):
        raise OperationalError("the server closed the connection")

    monkeypatch.setattr(recording, "increment", database_gone)
    with pytest.raises(OperationalError):
        recording.record(
            "execution.fencing_rejected", counter=("croniq_fencing_rejections_total", {})
        )
    # Neither: /metrics never lags the audit trail.
    assert not AuditEvent.objects.filter(action="execution.fencing_rejected").exists()
    assert not Counter.objects.filter(name="croniq_fencing_rejections_total").exists()
