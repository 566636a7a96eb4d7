"""Grouped incidents: a storm of failures on one runner pool or one runner
becomes one notification that names them all, not one per job (issue 16,
item 4).

Each failure notification (FAILURES) carries two keys: its job's pool (the
job's labels, sorted and comma-joined) and the runner it ran on. On one
channel, per key, within CRONIQ_INCIDENT_WINDOW seconds:

- the first CRONIQ_INCIDENT_THRESHOLD failure notifications go out one by
  one, as usual;
- the next failure of a *different* job (so one job failing its retries is
  never a storm) opens an `incident.grouped` notification for that key, and
  it and every later failure with that key on that channel are created in
  state `grouped`, attached to it (`group`), until it closes;
- `close_incidents` closes it CRONIQ_INCIDENT_WINDOW seconds after it
  opened: it fills its message (how many jobs, which, the last runner) and
  makes it pending. A failure within a window after that (the storm goes
  on) opens the next incident at once, not another round of single ones.

So a storm of 500 failing jobs on one pool within a window reaches each
channel as at most threshold + 1 notifications. The pool key is tried
before the runner key. A failure the router muted, throttled or kept for a
digest is not grouped and does not count.
"""

import math
import uuid
from collections import Counter, defaultdict
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction

from notifications import messages, wakeup
from notifications.models import Notification

INCIDENT = "incident.grouped"
FAILURES = (
    "execution.failed",
    "execution.given_up",
    "execution.timed_out",
    "execution.lost",
    "job.failing",
)
# States of a failure notification that went out (or is going out) alone.
ALONE = (Notification.PENDING, Notification.DELIVERED, Notification.GIVEN_UP)
# Lines of an incident's "details" before "... and N more jobs".
MAX_DETAILS = 50


def window():
    return timedelta(seconds=settings.CRONIQ_INCIDENT_WINDOW)


def groupable(event):
    return event.name in FAILURES and bool(event.data.get("job"))


def keys_of(notification, event):
    """Set the grouping keys of a failure notification (nothing else has any)."""
    if not groupable(event):
        return
    notification.pool = ",".join(sorted(event.data["job"].get("labels") or []))
    notification.runner_name = messages.runner_name(event) or ""


def fold(notification, event, now, known=None):
    """Attach a failure notification (keys set, not saved) to its channel's
    open incident, opening one when it is the storm's first beyond the
    threshold. True when folded (its state is then `grouped`).

    `known`: a dict the router keeps for one transaction, remembering the
    open incident (or None) of each (channel, key) it looked up."""
    if not groupable(event):
        return False
    known = {} if known is None else known
    keys = [key for key in incident_keys(notification) if key[1] or key[0] == "pool"]
    incident = next(
        (found for key in keys if (found := open_incident(notification.channel_id, key, known))),
        None,
    )
    if incident is None:
        stormy = next((key for key in keys if storm(notification, key, now)), None)
        if stormy is None:
            return False
        incident = open_one(notification.channel, stormy, now)
        known[notification.channel_id, stormy] = incident
    notification.state = Notification.GROUPED
    notification.group = incident
    return True


def incident_keys(notification):
    return [("pool", notification.pool), ("runner_name", notification.runner_name)]


def incidents_of(channel_id, key):
    field, value = key
    # A pool's incident has no runner_name; a runner's has one.
    other = {"runner_name": ""} if field == "pool" else {}
    return Notification.objects.filter(
        name=INCIDENT, channel_id=channel_id, **{field: value}, **other
    )


def open_incident(channel_id, key, known):
    """The open incident of `key` on the channel, locked until the router
    commits (so `close_incidents` never sends it while members join)."""
    if (channel_id, key) not in known:
        found = incidents_of(channel_id, key).filter(state=Notification.GROUPED)
        if connection.vendor == "postgresql":
            found = found.select_for_update()
        known[channel_id, key] = found.order_by("created_at").first()
    return known[channel_id, key]


def alone_recently(channel_id, key, since):
    """The failure notifications with `key` that went out alone since `since`."""
    field, value = key
    return Notification.objects.filter(
        channel_id=channel_id,
        name__in=FAILURES,
        state__in=ALONE,
        created_at__gte=since,
        **{field: value},
    )


def storm(notification, key, now):
    if recently_closed(notification.channel_id, key, now):
        return True
    recent = alone_recently(notification.channel_id, key, now - window())
    if recent.count() < settings.CRONIQ_INCIDENT_THRESHOLD:
        return False
    return recent.exclude(job_id=notification.job_id).exists()


def recently_closed(channel_id, key, now):
    """An incident of `key` closed less than a window ago: the storm goes on."""
    return incidents_of(channel_id, key).filter(created_at__gte=now - 2 * window()).exists()


def open_one(channel, key, now):
    field, value = key
    closes = now + window()
    incident = Notification(
        id=uuid.uuid4(),
        name=INCIDENT,
        channel=channel,
        state=Notification.GROUPED,
        pool=value if field == "pool" else "",
        runner_name=value if field == "runner_name" else "",
        created_at=now,
        next_attempt_at=closes,  # when it closes
    )
    what = f"jobs on runner {value}" if field == "runner_name" else pool_jobs(value)
    incident.message = messages.body(
        incident.id,
        INCIDENT,
        now,
        f"{what} are failing: grouping until {messages.clock(closes)}",
        "/",
    )
    incident.save()
    return incident


def close_incidents(now):
    """Send every incident whose window has ended; returns how many."""
    with transaction.atomic():
        due = Notification.objects.filter(
            name=INCIDENT, state=Notification.GROUPED, next_attempt_at__lte=now
        ).order_by("next_attempt_at")
        if connection.vendor == "postgresql":
            due = due.select_for_update(skip_locked=True)
        closed = 0
        for incident in due:
            close(incident, now)
            closed += 1
        if closed:
            wakeup.poke_after_commit()
    return closed


def close(incident, now):
    key = ("runner_name", incident.runner_name) if incident.runner_name else ("pool", incident.pool)
    before = alone_recently(incident.channel_id, key, incident.created_at - window()).filter(
        created_at__lte=incident.created_at
    )
    failures = sorted(
        [*before, *incident.members.all()], key=lambda member: (member.created_at, str(member.id))
    )
    incident.message = summary_message(incident, key, failures, now)
    incident.state = Notification.PENDING
    incident.next_attempt_at = now
    incident.save(update_fields=["message", "state", "next_attempt_at"])


def summary_message(incident, key, failures, now):
    per_job = defaultdict(Counter)
    for failure in failures:
        per_job[(failure.message.get("job") or {}).get("name", "a deleted job")][failure.name] += 1
    span = (failures[-1].created_at - failures[0].created_at).total_seconds() if failures else 0
    minutes = max(1, math.ceil(span / 60))
    last_runner = next((f.runner_name for f in reversed(failures) if f.runner_name), None)
    jobs = messages.plural(len(per_job), "job")
    field, value = key
    fields = {}
    if field == "pool":
        text = f"{pool_jobs(value, jobs)} failed in {minutes} min"
        if last_runner:
            text += f", last runner: {last_runner}"
        path = "/"
    else:
        text = f"{jobs} failed on runner {value} in {minutes} min"
        fields["runner"] = {"name": value}
        path = "/runners/"
    fields["details"] = detail_lines(per_job)
    return messages.body(incident.id, INCIDENT, now, text, path, **fields)


def pool_jobs(pool, jobs="jobs"):
    """ "12 jobs needing `linux,db`"; jobs without labels run anywhere."""
    return f"{jobs} needing `{pool}`" if pool else f"{jobs} without labels"


def detail_lines(per_job):
    """ "billing-sync: execution.failed x2, job.failing", one line per job
    in the order they first failed."""
    lines = []
    for name, counts in per_job.items():
        told = ", ".join(
            f"{event} x{count}" if count > 1 else event for event, count in counts.items()
        )
        lines.append(f"{name}: {told}")
    if len(lines) > MAX_DETAILS:
        more = len(lines) - MAX_DETAILS
        lines = [*lines[:MAX_DETAILS], f"... and {messages.plural(more, 'more job')}"]
    return lines
