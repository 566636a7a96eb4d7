"""The outbox's history is pruned; nothing still to deliver ever is."""

import datetime as dt

import pytest

from audit.models import AuditEvent, Counter
from notifications import retention
from notifications.models import Channel, Delivery, Event, Notification

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
OLD = NOW - dt.timedelta(days=31)
RECENT = NOW - dt.timedelta(days=1)
pytestmark = pytest.mark.django_db


def notification(channel, state, created_at, routed=True):
    event = Event.objects.create(
        name="execution.failed", at=created_at, routed_at=created_at if routed else None
    )
    return Notification.objects.create(
        event=event, name=event.name, channel=channel, state=state, created_at=created_at
    )


def test_old_finished_history_goes_and_unfinished_or_recent_stays(settings):
    settings.CRONIQ_NOTIFICATION_RETENTION_DAYS = 30
    channel = Channel.objects.create(name="hook", kind="webhook", url="http://x.invalid/")
    delivered = notification(channel, Notification.DELIVERED, OLD)
    Delivery.objects.create(notification=delivered, attempt=1, at=OLD, ok=True, latency=0.01)
    given_up = notification(channel, Notification.GIVEN_UP, OLD)
    pending = notification(channel, Notification.PENDING, OLD)
    digest = notification(channel, Notification.DIGEST, OLD)
    recent = notification(channel, Notification.DELIVERED, RECENT)
    unrouted = Event.objects.create(name="job.failing", at=OLD)

    assert retention.prune(NOW) == 4  # two notifications, then their events
    assert set(Notification.objects.values_list("pk", flat=True)) == {
        pending.pk,
        digest.pk,
        recent.pk,
    }
    assert not Delivery.objects.exists()
    assert set(Event.objects.values_list("pk", flat=True)) == {
        pending.event_id,
        digest.event_id,
        recent.event_id,
        unrouted.pk,
    }
    assert given_up.event_id not in Event.objects.values_list("pk", flat=True)
    assert retention.prune(NOW) == 0


def test_members_of_an_open_grouped_incident_stay(settings):
    settings.CRONIQ_NOTIFICATION_RETENTION_DAYS = 30
    channel = Channel.objects.create(name="hook", kind="webhook", url="http://x.invalid/")
    incident = Notification.objects.create(
        name="incident.grouped", channel=channel, state=Notification.GROUPED, created_at=OLD
    )
    member = notification(channel, Notification.GROUPED, OLD)
    member.group = incident
    member.save()
    assert retention.prune(NOW) == 0
    assert Notification.objects.count() == 2
    # Closed and sent, the incident and its members are history like the rest.
    Notification.objects.filter(pk=incident.pk).update(state=Notification.DELIVERED)
    assert retention.prune(NOW) == 3  # the incident, its member, the member's event


def test_pruning_goes_in_bounded_batches(settings):
    settings.CRONIQ_NOTIFICATION_RETENTION_DAYS = 30
    channel = Channel.objects.create(name="hook", kind="webhook", url="http://x.invalid/")
    for _ in range(7):
        notification(channel, Notification.DELIVERED, OLD)
    assert retention.prune(NOW, batch_size=2, max_batches=2) == 4 + 4
    assert Notification.objects.count() == 3


def test_a_disabled_channels_pending_notifications_are_given_up_after_the_give_up_time(settings):
    settings.CRONIQ_NOTIFY_GIVE_UP = 3600
    off = Channel.objects.create(name="off", kind="webhook", url="http://x.invalid/", enabled=False)
    on = Channel.objects.create(name="on", kind="webhook", url="http://y.invalid/")
    stranded = notification(off, Notification.PENDING, NOW - dt.timedelta(hours=2))
    young = notification(off, Notification.PENDING, NOW - dt.timedelta(minutes=30))
    retrying = notification(on, Notification.PENDING, NOW - dt.timedelta(hours=2))

    assert retention.expire_stranded(NOW) == 1
    stranded.refresh_from_db()
    assert (stranded.state, stranded.last_error) == (
        Notification.GIVEN_UP,
        "its channel is disabled",
    )
    # Younger ones wait (the channel may be enabled again); an enabled
    # channel's delivery gives up by its own tries.
    assert Notification.objects.get(pk=young.pk).state == Notification.PENDING
    assert Notification.objects.get(pk=retrying.pk).state == Notification.PENDING
    event = AuditEvent.objects.get(action="notification.given_up")
    assert event.data["channel"] == "off"
    total = Counter.objects.get(name="croniq_notifications_total")
    assert (total.labels, total.value) == (
        "channel=off,event=execution.failed,outcome=given_up",
        1,
    )
    assert retention.expire_stranded(NOW) == 0
