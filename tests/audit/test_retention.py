"""Audit retention: prune(now) deletes only events past CRONIQ_AUDIT_RETENTION_DAYS."""

from datetime import UTC, datetime, timedelta

import pytest

import audit
from audit.models import AuditEvent

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def thirty_days(settings):
    settings.CRONIQ_AUDIT_RETENTION_DAYS = 30


def event_at(at, action="runner.takeover"):
    return audit.record(action, at=at)


def test_prune_deletes_only_events_older_than_the_retention(db):
    old = event_at(NOW - timedelta(days=31))
    boundary = event_at(NOW - timedelta(days=30))
    recent = event_at(NOW - timedelta(days=29))
    assert audit.prune(NOW) == 1
    remaining = set(AuditEvent.objects.values_list("id", flat=True))
    assert remaining == {boundary.id, recent.id}
    assert old.id not in remaining


def test_prune_reads_the_retention_setting(db, settings):
    event_at(NOW - timedelta(days=10))
    assert audit.prune(NOW) == 0
    settings.CRONIQ_AUDIT_RETENTION_DAYS = 7
    assert audit.prune(NOW) == 1
    assert not AuditEvent.objects.exists()


def test_prune_stops_after_its_batches_and_the_next_call_continues(db):
    for day in range(5):
        event_at(NOW - timedelta(days=40 + day))
    keep = event_at(NOW)
    # No time budget: this is about the batch count (a busy machine could
    # spend the default 10 ms on the first batch).
    assert audit.prune(NOW, batch_size=2, max_batches=2, budget=None) == 4
    assert AuditEvent.objects.count() == 2
    assert audit.prune(NOW, batch_size=2, max_batches=2, budget=None) == 1
    assert list(AuditEvent.objects.values_list("id", flat=True)) == [keep.id]


def test_prune_deletes_the_oldest_first(db):
    oldest = event_at(NOW - timedelta(days=90))
    newer = event_at(NOW - timedelta(days=60))
    assert audit.prune(NOW, batch_size=1, max_batches=1) == 1
    assert list(AuditEvent.objects.values_list("id", flat=True)) == [newer.id]
    assert not AuditEvent.objects.filter(id=oldest.id).exists()


def test_prune_with_nothing_old_deletes_nothing(db):
    event_at(NOW)
    assert audit.prune(NOW) == 0
    assert AuditEvent.objects.count() == 1


def test_no_batch_starts_that_would_overrun_the_time_budget(db):
    """A stepping clock: each batch takes 4 ms."""
    for day in range(6):
        event_at(NOW - timedelta(days=40 + day))
    ticks = iter(range(1, 1000))

    def clock():
        return next(ticks) * 0.004

    assert audit.prune(NOW, batch_size=2, budget=0.01, clock=clock) == 2
    assert audit.prune(NOW, batch_size=2, budget=None) == 4


def test_the_loops_call_deletes_a_backlog_over_many_passes_within_its_budget(db):
    """audit.prune(now), as the loop calls it, on a backlog: with batches of
    4 ms, one batch a pass (the defaults' budget has no room for a second)."""
    from audit import retention

    AuditEvent.objects.bulk_create(
        AuditEvent(at=NOW - timedelta(days=40), action="runner.takeover")
        for _ in range(2 * retention.BATCH_SIZE + 1)
    )
    ticks = iter(range(1, 1000))

    def clock():
        return next(ticks) * 0.004

    assert audit.prune(NOW, clock=clock) == retention.BATCH_SIZE
    assert audit.prune(NOW, budget=None) == retention.BATCH_SIZE + 1
