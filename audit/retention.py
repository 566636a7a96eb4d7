"""Audit retention: the loop prunes events older than CRONIQ_AUDIT_RETENTION_DAYS."""

import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings

from audit.models import AuditEvent

# The loop's housekeeping calls prune(now) every few seconds: small batches,
# and no batch starts past BUDGET seconds, so a backlog (retention just
# shortened) drains over many passes instead of stalling one tick.
BATCH_SIZE = 500
MAX_BATCHES = 50
BUDGET = 0.01


def cutoff(now: datetime) -> datetime:
    return now - timedelta(days=settings.CRONIQ_AUDIT_RETENTION_DAYS)


def prune(
    now: datetime,
    *,
    batch_size: int = BATCH_SIZE,
    max_batches: int = MAX_BATCHES,
    budget: float | None = BUDGET,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Delete events older than the retention period, oldest first.

    Each batch is one short DELETE by primary key, so the web process and the
    loop never wait long on each other. At most `batch_size * max_batches`
    rows go per call, and with a `budget` (seconds of `clock`; None: none)
    no batch starts once the batches so far took it, nor one that, at the
    pace of the last, would not end within it (the first always runs).
    Returns how many events were deleted.
    """
    old = AuditEvent.objects.filter(at__lt=cutoff(now)).order_by("at", "id")
    deleted = 0
    deadline = None if budget is None else clock() + budget
    for _ in range(max_batches):
        started = clock()
        ids = list(old.values_list("id", flat=True)[:batch_size])
        if not ids:
            break
        deleted += AuditEvent.objects.filter(id__in=ids).delete()[0]
        if len(ids) < batch_size:
            break
        if deadline is not None and 2 * clock() - started > deadline:
            break  # the next batch, as long as this one, would overrun
    return deleted
