"""The daily digest: a rule with `digest` collects its notifications (state
`digest`) and sends them as one, once a day at CRONIQ_DIGEST_AT (HH:MM in
settings.TIME_ZONE).

The digest sent at (or, when the loop was down then, after) today's digest
time holds everything collected before that time; what arrives later waits
for tomorrow's. Its members become `digested` and point to it (`group`), so
running the step twice, even in the same minute, sends nothing twice.

The digest is a Notification named "digest" whose body's "event" is
"digest": an addition to docs/design.md §9's event names, like incident.grouped.
"""

import datetime as dt
import uuid
from itertools import groupby

from django.conf import settings
from django.db import transaction

from core import db
from notifications import messages, wakeup
from notifications.models import Notification

DIGEST = "digest"
# Lines of a digest's "details" before "... and N more".
MAX_DETAILS = 200


def send_digests(now: dt.datetime) -> int:
    """Send the digests due at `now`; returns how many were created."""
    with transaction.atomic():
        waiting = Notification.objects.filter(
            state=Notification.DIGEST, created_at__lte=last_digest_time(now)
        ).order_by("rule_id", "channel_id", "event__at", "created_at", "id")
        waiting = db.for_update(waiting, skip_locked=True, of=("self",))
        waiting = waiting.select_related("rule", "channel")
        sent = 0
        for _, members in groupby(waiting, key=lambda n: (n.rule_id, n.channel_id)):
            send(list(members), now)
            sent += 1
        if sent:
            wakeup.poke_after_commit()
    return sent


def send(members: list[Notification], now: dt.datetime) -> None:
    first = members[0]
    digest = Notification(
        id=uuid.uuid4(),
        name=DIGEST,
        rule=first.rule,
        channel=first.channel,
        state=Notification.PENDING,
        created_at=now,
        next_attempt_at=now,
    )
    of_rule = f" of {first.rule.name}" if first.rule else ""
    summary = (
        f"Daily digest{of_rule}: {messages.plural(len(members), 'notification')}"
        f" since {messages.clock(happened(first))}"
    )
    digest.message = messages.body(
        digest.id, DIGEST, now, summary, "/", details=detail_lines(members)
    )
    digest.save()
    Notification.objects.filter(pk__in=[member.pk for member in members]).update(
        state=Notification.DIGESTED, group=digest
    )


def detail_lines(members: list[Notification]) -> list[str]:
    lines = [
        f"{messages.clock(happened(member))} {member.message.get('summary', member.name)}"
        for member in members
    ]
    if len(lines) > MAX_DETAILS:
        more = len(lines) - MAX_DETAILS
        lines = [*lines[:MAX_DETAILS], f"... and {more} more"]
    return lines


def happened(member: Notification) -> dt.datetime:
    """When the member's event happened (its body's "at")."""
    at = member.message.get("at")
    return messages.parse(at) if at else member.created_at


def digest_time() -> dt.time:
    """CRONIQ_DIGEST_AT as a time of day."""
    try:
        return dt.time.fromisoformat(settings.CRONIQ_DIGEST_AT)
    except ValueError:
        raise ValueError(
            f"CRONIQ_DIGEST_AT: {settings.CRONIQ_DIGEST_AT!r} is not a time of day as HH:MM"
        ) from None


def last_digest_time(now: dt.datetime) -> dt.datetime:
    """The latest digest time at or before `now`."""
    zone = messages.zone()
    local = now.astimezone(zone)
    at = dt.datetime.combine(local.date(), digest_time(), tzinfo=zone)
    if at > local:
        at = dt.datetime.combine(local.date() - dt.timedelta(days=1), digest_time(), tzinfo=zone)
    return at
