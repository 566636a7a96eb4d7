"""Audit retention: the loop prunes events older than CRONIQ_AUDIT_RETENTION_DAYS."""

from datetime import timedelta

from django.conf import settings

from audit.models import AuditEvent


def cutoff(now):
    return now - timedelta(days=settings.CRONIQ_AUDIT_RETENTION_DAYS)


def prune(now, *, batch_size=1000, max_batches=50):
    """Delete events older than the retention period, oldest first.

    Each batch is one short DELETE by primary key, so the web process and the
    loop never wait long on each other. At most `batch_size * max_batches`
    rows go per call; a backlog (retention just shortened) drains over the
    next calls. Returns how many events were deleted.
    """
    old = AuditEvent.objects.filter(at__lt=cutoff(now)).order_by("at", "id")
    deleted = 0
    for _ in range(max_batches):
        ids = list(old.values_list("id", flat=True)[:batch_size])
        if not ids:
            break
        deleted += AuditEvent.objects.filter(id__in=ids).delete()[0]
        if len(ids) < batch_size:
            break
    return deleted
