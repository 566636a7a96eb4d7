"""Notification retention: the loop prunes the outbox's history.

Events, notifications and their delivery log older than
CRONIQ_NOTIFICATION_RETENTION_DAYS go, oldest first, in small batches (as
audit retention does). Nothing still to be delivered is ever pruned: a
pending notification, one waiting for its digest, an open grouped incident
and its members, or an event not yet routed stays whatever its age.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet

import audit
from notifications import channels, delivery_log
from notifications.models import Event, Notification

BATCH_SIZE = 500
MAX_BATCHES = 10
UNFINISHED = (Notification.PENDING, Notification.DIGEST)
INCIDENT = "incident.grouped"
# An incident still collecting members (notifications.incidents) waits in
# state `grouped` until its window closes.
OPEN_INCIDENT = Q(name=INCIDENT, state=Notification.GROUPED)


def expire_stranded(now: datetime) -> int:
    """Give up the pending notifications of a disabled channel once they are
    older than CRONIQ_NOTIFY_GIVE_UP, as a failing delivery would be: a
    disabled channel sends nothing, so they would wait for ever, counted
    in croniq_notifications_pending. Re-enabled sooner, it sends them.
    Audited and counted; returns how many."""
    stale = Notification.objects.filter(
        state=Notification.PENDING,
        channel__enabled=False,
        created_at__lt=now - timedelta(seconds=settings.CRONIQ_NOTIFY_GIVE_UP),
    ).select_related("channel")
    expired = 0
    for notification in stale[:BATCH_SIZE]:
        with transaction.atomic():
            done = Notification.objects.filter(
                pk=notification.pk, state=Notification.PENDING, channel__enabled=False
            ).update(
                state=Notification.GIVEN_UP,
                next_attempt_at=None,
                last_error="its channel is disabled",
            )
            if not done:
                continue
            result = channels.Result(ok=False, error="its channel is disabled")
            delivery_log.give_up(notification, notification.attempts, result, now)
            audit.increment(
                delivery_log.TOTAL,
                channel=notification.channel.name,
                event=notification.name,
                outcome=delivery_log.GIVEN_UP,
            )
            expired += 1
    return expired


def cutoff(now: datetime) -> datetime:
    return now - timedelta(days=settings.CRONIQ_NOTIFICATION_RETENTION_DAYS)


def prune(now: datetime, *, batch_size: int = BATCH_SIZE, max_batches: int = MAX_BATCHES) -> int:
    """Delete finished notifications (their deliveries cascade) and routed
    events with no notification left, older than the retention; returns
    how many rows of either went, with the notifications of disabled
    channels given up (`expire_stranded`)."""
    expired = expire_stranded(now)
    before = cutoff(now)
    finished = (
        Notification.objects.filter(created_at__lt=before)
        .exclude(state__in=UNFINISHED)
        .exclude(OPEN_INCIDENT)
        # Members of an incident still collecting, or of one not yet sent.
        .exclude(group__state__in=UNFINISHED)
        .exclude(group__name=INCIDENT, group__state=Notification.GROUPED)
    )
    deleted = delete_in_batches(finished.order_by("created_at"), batch_size, max_batches)
    spent = Event.objects.filter(
        at__lt=before, routed_at__isnull=False, notifications__isnull=True
    ).order_by("at")
    return expired + deleted + delete_in_batches(spent, batch_size, max_batches)


def delete_in_batches(rows: QuerySet, batch_size: int, max_batches: int) -> int:
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
