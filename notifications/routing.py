"""From recorded Events to Notifications (issue 16, item 3): the second half
of the outbox.

Each unrouted event, oldest first, goes through the enabled rules once
(`matching.routes`); every (rule, enabled channel) it matches becomes one
Notification, in the transaction that marks the event routed, so an event
is routed exactly once even with several loops (on PostgreSQL the routers
take turns, and each takes only events no other holds: `SKIP LOCKED`).

A notification's state, first that applies:

- `muted`: an active Mute covers its rule, its job, or everything;
- `digest`: its rule collects a daily digest (`notifications.digests`);
- `suppressed`: the rule throttles and a notification of the same rule
  about the same job (for runner.* events the same runner; other events
  without a job share one) on the same channel is pending or was delivered
  within `throttle` seconds (job.recovered is never suppressed: it ends
  the episode the throttle was quietening);
- `grouped`: folded into an incident (`notifications.incidents`);
- `pending`: to deliver now. When the throttle suppressed notifications of
  its (rule, job, channel) since the last one that went out, it carries a
  "details" line per event name ("+4 more execution.failed suppressed since
  02:10 UTC") and those notifications point to it (`group`), so each
  suppressed one is summed up exactly once. (What is suppressed after the
  last one out is told when the next one goes out, not on its own.)
"""

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, Min

from core import db
from notifications import incidents, matching, messages, mutes, wakeup
from notifications.models import Event, Notification


def route_pending(now: datetime, limit: int = 200) -> int:
    """Route up to `limit` unrouted events; returns how many were routed
    (fewer than `limit`: nothing is left waiting)."""
    if not Event.objects.filter(routed_at__isnull=True).exists():
        # Most rounds find nothing (the `event_unrouted` index): a read, not
        # a transaction that takes SQLite's write lock or the routers' turn.
        return 0
    with transaction.atomic():
        take_turn()
        events = claim(limit)
        if not events:
            return 0
        rules = matching.enabled_rules()
        active = mutes.active_mutes(now)
        grouping = incidents.Grouping(now)
        quiet = []
        states = [
            route(event, rule, channel, active, grouping, quiet, now).state
            for event in events
            for rule, channel in matching.routes(event, rules)
        ]
        Notification.objects.bulk_create(quiet)
        Event.objects.filter(pk__in=[event.pk for event in events]).update(routed_at=now)
        if Notification.PENDING in states:
            wakeup.poke_after_commit()
    return len(events)


# Routers on PostgreSQL take turns (a transaction-level advisory lock): the
# throttle and the incident counts read what earlier routing wrote, so two
# routers deciding at once could both send "the first" of something. SKIP
# LOCKED alone would keep events from being routed twice, not that.
ROUTING_LOCK = 0x63726E71  # "crnq"


def take_turn() -> None:
    db.advisory_xact_lock(ROUTING_LOCK)


def claim(limit: int) -> list[Event]:
    """The oldest unrouted events, locked against other routers."""
    unrouted = Event.objects.filter(routed_at__isnull=True).order_by("id")
    unrouted = db.skip_locked(unrouted)
    ids = list(unrouted.values_list("id", flat=True)[:limit])
    related = Event.objects.select_related("job", "execution__runner", "runner")
    return list(related.filter(id__in=ids).order_by("id"))


# Notifications nothing later in the batch reads back (the throttle reads
# pending, delivered and suppressed ones; the storm counts pending ones):
# written together at the end of the batch, the bulk of a failure storm.
QUIET = (Notification.GROUPED, Notification.MUTED, Notification.DIGEST)


def route(
    event: Event,
    rule: Any,
    channel: Any,
    active_mutes: list[Any],
    grouping: incidents.Grouping,
    quiet: list[Notification],
    now: datetime,
) -> Notification:
    """Create the notification of `event` for (rule, channel); those in a
    QUIET state are added to `quiet` for the caller to write."""
    notification = Notification(
        id=uuid.uuid4(),
        event=event,
        name=event.name,
        rule=rule,
        channel=channel,
        job_id=event.job_id,
        created_at=now,
        next_attempt_at=now,
    )
    incidents.keys_of(notification, event)
    if event.name.startswith("runner."):
        notification.runner_name = messages.runner_name(event) or ""
    if event.name.startswith("check."):
        notification.check_name = messages.check_name(event)
    notification.state = state_of(notification, event, rule, active_mutes, grouping, now)
    details = []
    if notification.state == Notification.PENDING:
        details = suppressed_since(notification)
    extra = {"details": [line for line, _ in details]} if details else None
    notification.message = messages.message(notification.id, event, extra)
    if notification.state in QUIET:
        quiet.append(notification)
        return notification
    notification.save()
    for _, ids in details:
        Notification.objects.filter(pk__in=ids).update(group=notification)
    return notification


def state_of(
    notification: Notification,
    event: Event,
    rule: Any,
    active_mutes: list[Any],
    grouping: incidents.Grouping,
    now: datetime,
) -> str:
    if any(mutes.covers(mute, rule, notification.job_id) for mute in active_mutes):
        return Notification.MUTED
    if rule.digest:
        return Notification.DIGEST
    if throttled(notification, rule, now):
        return Notification.SUPPRESSED
    if grouping.fold(notification, event):
        return Notification.GROUPED
    return Notification.PENDING


# Never held back by a throttle: the news that ends what it held back (and
# carries its summary).
UNTHROTTLED = ("job.recovered", "check.up")


def throttled(notification: Notification, rule: Any, now: datetime) -> bool:
    if not rule.throttle or notification.name in UNTHROTTLED:
        return False
    return (
        same_subject(notification)
        .filter(
            state__in=[Notification.PENDING, Notification.DELIVERED],
            created_at__gt=now - timedelta(seconds=rule.throttle),
        )
        .exists()
    )


def same_subject(notification: Notification) -> Any:
    """Notifications of the same rule and channel about the same job, or
    for events without a job the same runner (runner.*) or check (check.*),
    or none (labels.unserved, scheduler.stalled: one throttle per rule)."""
    subject = {"job_id": notification.job_id}
    if notification.job_id is None:
        subject["runner_name"] = notification.runner_name
        subject["check_name"] = notification.check_name
    return Notification.objects.filter(
        rule_id=notification.rule_id, channel_id=notification.channel_id, **subject
    )


def suppressed_since(notification: Notification) -> list[tuple[str, list[Any]]]:
    """[(line, ids)]: what the throttle held back of this (rule, job,
    channel) and no notification has summed up yet, per event name."""
    waiting = same_subject(notification).filter(state=Notification.SUPPRESSED, group__isnull=True)
    found = waiting.values("name").annotate(count=Count("id"), first=Min("created_at"))
    details = []
    for row in sorted(found, key=lambda row: (row["first"], row["name"])):
        line = f"+{row['count']} more {row['name']} suppressed since {messages.clock(row['first'])}"
        details.append((line, list(waiting.filter(name=row["name"]).values_list("id", flat=True))))
    return details
