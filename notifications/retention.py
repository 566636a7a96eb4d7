"""Notification retention: the loop prunes the outbox's history.

Events, notifications and their delivery log older than
CRONIQ_NOTIFICATION_RETENTION_DAYS go, oldest first, in small batches (as
audit retention does). Nothing still to be delivered is ever pruned: a
pending notification, one waiting for its digest, an open grouped incident,
or an event not yet routed stays whatever its age.
"""

from datetime import timedelta

from django.conf import settings

from notifications.models import Event, Notification

BATCH_SIZE = 500
MAX_BATCHES = 10
UNFINISHED = (Notification.PENDING, Notification.DIGEST)


def cutoff(now):
    return now - timedelta(days=settings.CRONIQ_NOTIFICATION_RETENTION_DAYS)


def prune(now, *, batch_size=BATCH_SIZE, max_batches=MAX_BATCHES):
    """Delete finished notifications (their deliveries cascade) and routed
    events with no notification left, older than the retention; returns
    how many rows of either went."""
    before = cutoff(now)
    finished = Notification.objects.filter(created_at__lt=before).exclude(state__in=UNFINISHED)
    # A grouped incident still collecting members is pending: its members stay.
    finished = finished.exclude(group__state__in=UNFINISHED)
    deleted = delete_in_batches(finished.order_by("created_at"), batch_size, max_batches)
    spent = Event.objects.filter(
        at__lt=before, routed_at__isnull=False, notifications__isnull=True
    ).order_by("at")
    return deleted + delete_in_batches(spent, batch_size, max_batches)


def delete_in_batches(rows, batch_size, max_batches):
    deleted = 0
    for _ in range(max_batches):
        ids = list(rows.values_list("pk", flat=True)[:batch_size])
        if not ids:
            break
        rows.model.objects.filter(pk__in=ids).delete()
        deleted += len(ids)
        if len(ids) < batch_size:
            break
    return deleted
