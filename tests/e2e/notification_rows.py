"""Notifications written into an e2e database as routing leaves them, from a
process of their own (`manage.py shell`), and read back."""

import json

from harness.processes import manage, query

SECRET_VARIABLE = "CRONIQ_SECRET_HOOK"

INSERT = """
import json
from django.utils import timezone
from notifications import wakeup
from notifications.models import Channel, Notification

channel, _ = Channel.objects.get_or_create(
    name={channel!r},
    defaults=dict(kind="webhook", url={url!r}, secret="${{{variable}}}", timeout={timeout}),
)
now = timezone.now()
ids = []
for i in range({count}):
    row = Notification(channel=channel, name="execution.failed", created_at=now)
    row.next_attempt_at = now
    row.message = {{
        "id": str(row.pk),
        "event": "execution.failed",
        "at": now.isoformat(),
        "summary": "nightly-report failed (#%d)" % i,
        "url": "http://croniq.test/jobs/nightly-report",
    }}
    row.save()
    ids.append(str(row.pk))
wakeup.poke()
print(json.dumps(ids))
"""


def insert_notifications(database, url, count=1, timeout=5.0, channel="hook"):
    """`count` pending notifications due now on a webhook channel; their ids."""
    code = INSERT.format(
        channel=channel, url=url, variable=SECRET_VARIABLE, timeout=timeout, count=count
    )
    done = manage(database, "shell", "-c", code)
    return json.loads(done.stdout.strip().splitlines()[-1])


def states(database):
    """{notification id: (state, attempts)}; ids as the receiver sees them."""
    rows = query(database, "SELECT id, state, attempts FROM notifications_notification")
    return {normal_id(pk): (state, attempts) for pk, state, attempts in rows}


def delivery_rows(database):
    """{notification id: [(attempt, ok)]} from the delivery log."""
    found = {}
    rows = query(
        database,
        "SELECT notification_id, attempt, ok FROM notifications_delivery ORDER BY attempt",
    )
    for pk, attempt, ok in rows:
        found.setdefault(normal_id(pk), []).append((attempt, bool(ok)))
    return found


def normal_id(pk):
    """A UUID as text with dashes (SQLite stores the 32 hex digits)."""
    text = str(pk).replace("-", "")
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
