"""Channels and notifications as routing leaves them, for the delivery tests."""

from datetime import UTC, datetime

from audit.models import Counter
from audit.recording import labels_key
from notifications.models import Channel, Notification

NOW = datetime(2026, 3, 2, 3, 0, 12, tzinfo=UTC)
SECRET_VARIABLE = "CRONIQ_SECRET_TEST_HOOK"


def webhook(url, name="ops-hook", timeout=2.0, secret=f"${{{SECRET_VARIABLE}}}", **fields):
    return Channel.objects.create(
        name=name, kind=Channel.WEBHOOK, url=url, secret=secret, timeout=timeout, **fields
    )


def notification(channel, at=NOW, name="execution.given_up", **fields):
    fields.setdefault("created_at", at)
    fields.setdefault("next_attempt_at", at)
    row = Notification(channel=channel, name=name, **fields)
    row.message = {
        "id": str(row.pk),
        "event": name,
        "at": at.isoformat(),
        "summary": "billing-sync failed for good",
        "job": {"name": "billing-sync", "owner": "team-a", "labels": []},
        "url": "http://croniq.test/jobs/billing-sync",
    }
    row.save()
    return row


def counted(channel, event="execution.given_up", outcome="delivered"):
    labels = labels_key({"channel": channel.name, "event": event, "outcome": outcome})
    return Counter.objects.value_of("croniq_notifications_total", labels)
