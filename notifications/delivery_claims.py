"""Claims on the outbox (docs/design.md §9): which notifications are due, and
a lease on a few of them for one notifier to try each once.

`claimed_by` names the claim, `claimed_until` says when it lapses: another
notifier's unexpired claim is left alone, an expired one taken over. On
PostgreSQL the due rows are locked (SKIP LOCKED) and leased in one UPDATE;
on SQLite the claim is one UPDATE, which holds the database's single write
lock for one statement.
"""

import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Max, Min, Q, QuerySet

from core import db
from notifications.models import Channel, Notification

# Beyond the channel's timeout, a lease covers reading the notification and
# writing the try's result.
LEASE_MARGIN = 5.0


@dataclass(frozen=True)
class Claim:
    """A notification this notifier may deliver until `until`."""

    id: uuid.UUID
    token: str  # the `claimed_by` value: the claim, not only its holder
    until: datetime
    # As read when claimed (with its channel); nobody else changes it meanwhile.
    notification: Notification | None = field(default=None, compare=False, repr=False)


def default_owner() -> str:
    """Who claims: this host and process (written in `claimed_by`)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def due(now: datetime) -> QuerySet:
    """Pending notifications that may be tried at `now`, oldest first (the
    `notification_due` index; routing sets `next_attempt_at`)."""
    return (
        Notification.objects.filter(
            state=Notification.PENDING, next_attempt_at__lte=now, channel__enabled=True
        )
        .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lte=now))
        .order_by("next_attempt_at", "created_at")
    )


def next_due_at(now: datetime) -> datetime | None:
    """When the earliest pending notification comes due after `now`, or
    None: its next attempt, or the end of a claim on it (a notifier that
    died holding it: then anyone may take it)."""
    pending = Notification.objects.filter(state=Notification.PENDING)
    found = pending.aggregate(
        attempt=Min("next_attempt_at", filter=Q(next_attempt_at__gt=now)),
        claim=Min("claimed_until", filter=Q(claimed_until__gt=now)),
    )
    return min((at for at in found.values() if at is not None), default=None)


def lease_seconds(timeout: float) -> float:
    return timeout + LEASE_MARGIN


# A lane claims this many at a time (one transaction), then sends them in turn.
BATCH = 4


def claim(now: datetime, count: int = 1, owner: str | None = None) -> list[Claim]:
    """Claim up to `count` due notifications for one try each; [Claim].

    Another notifier's unexpired claim is skipped (on PostgreSQL without
    waiting for its lock); an expired one is taken over.
    """
    token = f"{(owner or default_owner())[:80]}/{uuid.uuid4().hex[:12]}"
    # SQLite has no row locks: one UPDATE holds its single write lock briefly.
    if not db.on_postgres():
        return claim_in_one_statement(now, count, token)
    candidates = due(now).select_related("channel")
    candidates = candidates.select_for_update(skip_locked=True, of=("self",))
    with transaction.atomic():
        return write_claims(list(candidates[:count]), token, now)


def write_claims(notifications: list[Notification], token: str, now: datetime) -> list[Claim]:
    """Claim `notifications` (PostgreSQL, locked by the caller) to be sent
    one after another: each lease covers the tries before it.

    One UPDATE written in SQL: an ORM update per notification was about a
    sixth of a delivery lane's CPU (cProfile, 400 deliveries). The conditions
    of a claim are checked again, though the caller's lock upholds them."""
    if not notifications:
        return []
    leases = []
    until = now + timedelta(seconds=LEASE_MARGIN)
    for notification in notifications:
        until += timedelta(seconds=notification.channel.timeout)
        leases.append(until)
    rows = ", ".join(["(%s::uuid, %s::timestamptz)"] * len(notifications))
    pairs = zip((notification.pk for notification in notifications), leases, strict=True)
    params = [value for pair in pairs for value in pair]
    with connection.cursor() as cursor:
        cursor.execute(CLAIM_LEASES.format(rows=rows), [token, *params, Notification.PENDING, now])
        claimed = {pk for (pk,) in cursor.fetchall()}
    return [
        Claim(notification.pk, token, lease, notification)
        for notification, lease in zip(notifications, leases, strict=True)
        if notification.pk in claimed
    ]


CLAIM_LEASES = f"""
    UPDATE {Notification._meta.db_table} notification
    SET claimed_until = lease.until, claimed_by = %s
    FROM (VALUES {{rows}}) AS lease (id, until)
    WHERE notification.id = lease.id AND notification.state = %s
      AND (notification.claimed_until IS NULL OR notification.claimed_until <= %s)
    RETURNING notification.id
"""


def claim_in_one_statement(now: datetime, count: int, token: str) -> list[Claim]:
    """SQLite: the claim is one UPDATE of the due rows, so the notifier holds
    the database's single write lock, which the scheduler loop's tick needs
    too, for one statement (a read and an update per row held it for 16 ms
    on average in a burst, bench/notifications.py). The claimed rows are
    read after the commit. One lease covers the tries of all of them, at
    the longest timeout of an enabled channel."""
    longest = Channel.objects.filter(enabled=True).aggregate(longest=Max("timeout"))["longest"]
    until = now + timedelta(seconds=LEASE_MARGIN + count * (longest or 0.0))
    oldest = due(now).values("pk")[:count]
    with transaction.atomic():
        Notification.objects.filter(pk__in=oldest).update(claimed_until=until, claimed_by=token)
    claimed = Notification.objects.filter(
        claimed_by=token, state=Notification.PENDING, next_attempt_at__lte=now
    ).select_related("channel")  # by the notification_due index
    return [Claim(n.pk, token, until, n) for n in claimed.order_by("next_attempt_at", "created_at")]
