"""The delivery log (docs/design.md §9): a try written while its claim holds,
with what follows from it: delivered, retried after a backoff, or given up
(audited) once the notification is older than CRONIQ_NOTIFY_GIVE_UP; each
try a Delivery row, counted and timed on /metrics.
"""

import collections
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction

import audit
from notifications import channels
from notifications.delivery_claims import Claim
from notifications.models import Delivery, Notification

FIRST_BACKOFF = 1.0
MAX_BACKOFF = 600.0
DELIVERED, FAILED, GIVEN_UP = "delivered", "failed", "given_up"
TOTAL = "croniq_notifications_total"
LATENCY = "croniq_notification_delivery_seconds"


def backoff(attempts: int) -> float:
    """Seconds to wait after `attempts` failed tries: 1, 2, 4 ... 600."""
    exponent = min(max(attempts, 1) - 1, 20)
    return min(MAX_BACKOFF, FIRST_BACKOFF * 2**exponent)


@dataclass(frozen=True)
class Tried:
    """One try, sent and waiting to be written (`record_many`)."""

    notification: Notification
    claimed: Claim
    result: channels.Result
    at: datetime
    retry: bool = True  # False: a test message, given up after one failed try
    sent: bool = True  # something went out: its latency goes into the histogram


def record(
    notification: Notification,
    claimed: Claim,
    result: channels.Result,
    now: datetime,
    retry: bool = True,
    observe: bool = True,
) -> str | None:
    """Write the try and its consequence, if the claim still holds; the
    outcome (DELIVERED, FAILED or GIVEN_UP), or None when the claim was lost.
    `observe`: the try's latency goes into the histogram (something was sent)."""
    return record_many([Tried(notification, claimed, result, now, retry, observe)])[0]


def record_many(tries: list[Tried]) -> list[str | None]:
    """Write tries in one transaction; their outcomes in order (None where
    the claim was lost). A burst of deliveries then takes a few write
    transactions instead of one per try: on SQLite each one waits for the
    database's single writer, which the scheduler loop's tick needs too."""
    outcomes = []
    deliveries = []
    totals = collections.Counter()
    latencies = []
    with transaction.atomic():
        for tried in tries:
            outcome = write_try(tried)
            outcomes.append(outcome)
            if outcome is None:
                continue
            notification, result = tried.notification, tried.result
            deliveries.append(
                Delivery(
                    notification=notification,
                    attempt=notification.attempts + 1,
                    at=tried.at,
                    ok=result.ok,
                    status_code=result.status_code,
                    error=result.error[:2000],
                    latency=result.latency,
                )
            )
            series = (notification.channel.name, notification.name)
            totals[(*series, DELIVERED if result.ok else FAILED)] += 1
            if tried.sent:
                latencies.append(result.latency)
            if outcome == GIVEN_UP and tried.retry:
                give_up(notification, notification.attempts + 1, result, tried.at)
                totals[(*series, GIVEN_UP)] += 1
        Delivery.objects.bulk_create(deliveries)
        for (channel, event, outcome), amount in sorted(totals.items()):
            audit.increment(TOTAL, amount, channel=channel, event=event, outcome=outcome)
        audit.observe(LATENCY, *latencies)
    return outcomes


def write_try(tried: Tried) -> str | None:
    """The notification's new state after `tried`, written if the claim
    still holds; the outcome, or None."""
    notification, result, now = tried.notification, tried.result, tried.at
    fields = {
        "attempts": notification.attempts + 1,
        "claimed_until": None,
        "claimed_by": "",
        "last_status": result.status_code,
        "last_error": result.error[:2000],
    }
    if result.ok:
        outcome = DELIVERED
        fields.update(state=Notification.DELIVERED, delivered_at=now, next_attempt_at=None)
    elif not tried.retry or given_up(notification, now):
        outcome = GIVEN_UP
        fields.update(state=Notification.GIVEN_UP, next_attempt_at=None)
    else:
        outcome = FAILED
        fields["next_attempt_at"] = now + timedelta(seconds=backoff(notification.attempts + 1))
    with connection.cursor() as cursor:
        cursor.execute(
            WRITE_TRY,
            [
                *(prepared(name, fields.get(name)) for name in WRITTEN_BY_A_TRY),
                prepared("id", notification.pk),
                Notification.PENDING,
                tried.claimed.token,
            ],
        )
        held = cursor.rowcount
    return outcome if held else None


def prepared(name: str, value: Any) -> Any:
    """`value` for the notification's column `name`, as the ORM writes it."""
    return Notification._meta.get_field(name).get_db_prep_save(value, connection)


# What a try writes, in SQL written once: the ORM's UPDATE, compiled for
# every try, was about a tenth of the notifier's CPU in a burst (py-spy).
# A column a try leaves alone (the state when it failed, delivered_at
# unless delivered) keeps its value.
WRITTEN_BY_A_TRY = (
    "attempts", "claimed_until", "claimed_by", "last_status", "last_error", "state",
    "delivered_at", "next_attempt_at",
)  # fmt: skip
KEPT_UNLESS_GIVEN = ("state", "delivered_at")
WRITE_TRY = "UPDATE {} SET {} WHERE id = %s AND state = %s AND claimed_by = %s".format(
    Notification._meta.db_table,
    ", ".join(
        f"{name} = COALESCE(%s, {name})" if name in KEPT_UNLESS_GIVEN else f"{name} = %s"
        for name in WRITTEN_BY_A_TRY
    ),
)


def given_up(notification: Notification, now: datetime) -> bool:
    age = (now - notification.created_at).total_seconds()
    return age > settings.CRONIQ_NOTIFY_GIVE_UP


def give_up(
    notification: Notification, attempts: int, result: channels.Result, now: datetime
) -> None:
    audit.record(
        "notification.given_up",
        target=notification,
        at=now,
        data={
            "channel": notification.channel.name,
            "event": notification.name,
            "attempts": attempts,
            "last_status": result.status_code,
            "last_error": result.error[:500],
        },
    )
