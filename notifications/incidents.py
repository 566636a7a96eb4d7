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
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Min, Q, QuerySet

from core import db
from notifications import messages, wakeup
from notifications.models import Event, Notification

INCIDENT = "incident.grouped"
FAILURES = (
    "execution.failed",
    "execution.given_up",
    "execution.timed_out",
    "execution.lost",
    "job.failing",
    "check.down",
)
# The pool key of a check.down: its check's labels behind this prefix (no
# job's pool has it), so checks storm apart from jobs. A host that dies
# takes all its cron jobs' checks down at once: one incident, not fifty.
CHECK_POOL = "checks:"
# States of a failure notification that went out (or is going out) alone.
ALONE = (Notification.PENDING, Notification.DELIVERED, Notification.GIVEN_UP)
# Lines of an incident's "details" before "... and N more jobs".
MAX_DETAILS = 50
# The loop looks for incidents to close at least this often (`next_close`).
CLOSE_CHECK_AT_LEAST_EVERY = 5.0


def window() -> timedelta:
    return timedelta(seconds=settings.CRONIQ_INCIDENT_WINDOW)


def groupable(event: Event) -> bool:
    return event.name in FAILURES and bool(event.data.get("job") or event.data.get("check"))


def keys_of(notification: Notification, event: Event) -> None:
    """Set the grouping keys of a failure notification (nothing else has any)."""
    if not groupable(event):
        return
    if event.data.get("check"):
        notification.pool = CHECK_POOL + ",".join(sorted(event.data.get("labels") or []))
        return
    notification.pool = ",".join(sorted(event.data["job"].get("labels") or []))
    notification.runner_name = messages.runner_name(event) or ""


class Grouping:
    """What one routing transaction knows of incidents, read once: the open
    incidents (on PostgreSQL locked until the router commits, so
    `close_incidents` never sends one while members join) and the keys of
    those opened within two windows (closed less than a window ago: the
    storm goes on)."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        found = Notification.objects.filter(name=INCIDENT, state=Notification.GROUPED)
        found = db.for_update(found)
        self.open = {(n.channel_id, key_of(n)): n for n in found.order_by("created_at")}
        recent = Notification.objects.filter(name=INCIDENT, created_at__gte=now - 2 * window())
        self.recent = {
            (n.channel_id, key_of(n)) for n in recent.only("channel", "pool", "runner_name")
        }

    def fold(self, notification: Notification, event: Event) -> bool:
        """Attach a failure notification (keys set, not saved) to its
        channel's open incident, opening one when it is the storm's first
        beyond the threshold. True when folded (its state is then `grouped`)."""
        if not groupable(event):
            return False
        channel = notification.channel_id
        keys = [key for key in incident_keys(notification) if key[1] or key[0] == "pool"]
        incident = next(
            (self.open[channel, key] for key in keys if (channel, key) in self.open), None
        )
        if incident is None:
            stormy = self.storm(notification, keys)
            if stormy is None:
                return False
            incident = open_one(notification.channel, stormy, self.now)
            self.open[channel, stormy] = incident
            self.recent.add((channel, stormy))
        notification.state = Notification.GROUPED
        notification.group = incident
        return True

    def storm(
        self, notification: Notification, keys: list[tuple[str, str]]
    ) -> tuple[str, str] | None:
        """The first key whose failures make a storm, or None."""
        channel = notification.channel_id
        going_on = [key for key in keys if (channel, key) in self.recent]
        if going_on:
            return going_on[0]
        recent = Notification.objects.filter(
            channel_id=channel,
            name__in=FAILURES,
            state__in=ALONE,
            created_at__gte=self.now - window(),
        )
        # Both keys counted in one query: this runs for every failure routed.
        counts = recent.aggregate(
            **{field: Count("id", filter=Q(**{field: value})) for field, value in keys}
        )
        for field, value in keys:
            if counts[field] >= settings.CRONIQ_INCIDENT_THRESHOLD:
                others = recent.filter(**{field: value}).exclude(**same_subject(notification))
                if others.exists():
                    return field, value
        return None


def same_subject(notification: Notification) -> dict[str, Any]:
    """The lookup of notifications about the same job, or the same check:
    one subject failing again and again is never a storm."""
    if notification.check_name:
        return {"check_name": notification.check_name}
    return {"job_id": notification.job_id}


def incident_keys(notification: Notification) -> list[tuple[str, str]]:
    return [("pool", notification.pool), ("runner_name", notification.runner_name)]


def key_of(incident: Notification) -> tuple[str, str]:
    """An incident's one key; a pool's incident has no runner_name."""
    if incident.runner_name:
        return "runner_name", incident.runner_name
    return "pool", incident.pool


def alone_recently(channel_id: int, key: tuple[str, str], since: datetime) -> QuerySet:
    """The failure notifications with `key` that went out alone since `since`."""
    field, value = key
    return Notification.objects.filter(
        channel_id=channel_id,
        name__in=FAILURES,
        state__in=ALONE,
        created_at__gte=since,
        **{field: value},
    )


def open_one(channel: Any, key: tuple[str, str], now: datetime) -> Notification:
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


def next_close(now: datetime) -> datetime:
    """`Step.until` of close_incidents: the earliest end of an open
    incident's window, at the latest CLOSE_CHECK_AT_LEAST_EVERY from now (an
    incident opened meanwhile closes a window from its opening, no sooner,
    when the window is at least that long)."""
    latest = now + min(window(), timedelta(seconds=CLOSE_CHECK_AT_LEAST_EVERY))
    earliest = Notification.objects.filter(name=INCIDENT, state=Notification.GROUPED).aggregate(
        at=Min("next_attempt_at")
    )["at"]
    return latest if earliest is None else min(earliest, latest)


def close_incidents(now: datetime) -> int:
    """Send every incident whose window has ended; returns how many."""
    due = Notification.objects.filter(
        name=INCIDENT, state=Notification.GROUPED, next_attempt_at__lte=now
    ).order_by("next_attempt_at")
    if not due.exists():
        # Most runs close nothing: a read, not a write transaction, which on
        # SQLite would wait for the notifier's writes (a loop step, each second).
        return 0
    with transaction.atomic():
        due = db.skip_locked(due)
        closed = 0
        for incident in due:
            close(incident, now)
            closed += 1
        if closed:
            wakeup.poke_after_commit()
    return closed


def close(incident: Notification, now: datetime) -> None:
    key = key_of(incident)
    before = alone_recently(incident.channel_id, key, incident.created_at - window()).filter(
        created_at__lte=incident.created_at
    )
    previous = told_before(incident, key)
    if previous is not None:  # the storm went on: those were told already
        before = before.filter(created_at__gt=previous.created_at)
    failures = sorted(
        [*before, *incident.members.all()], key=lambda member: (member.created_at, str(member.id))
    )
    incident.message = summary_message(incident, key, failures, now)
    incident.state = Notification.PENDING
    incident.next_attempt_at = now
    incident.save(update_fields=["message", "state", "next_attempt_at"])


def told_before(incident: Notification, key: tuple[str, str]) -> Notification | None:
    """The incident of the same key and channel opened before this one."""
    field, value = key
    same = {"runner_name": value} if field == "runner_name" else {"pool": value, "runner_name": ""}
    earlier = Notification.objects.filter(
        name=INCIDENT,
        channel_id=incident.channel_id,
        created_at__lt=incident.created_at,
        **same,
    )
    return earlier.order_by("-created_at").first()


def summary_message(
    incident: Notification, key: tuple[str, str], failures: list[Notification], now: datetime
) -> dict[str, Any]:
    per_job = defaultdict(Counter)
    for failure in failures:
        subject = failure.message.get("job") or failure.message.get("check") or {}
        per_job[subject.get("name", "a deleted job")][failure.name] += 1
    span = (failures[-1].created_at - failures[0].created_at).total_seconds() if failures else 0
    minutes = max(1, math.ceil(span / 60))
    last_runner = next((f.runner_name for f in reversed(failures) if f.runner_name), None)
    field, value = key
    noun = "check" if field == "pool" and value.startswith(CHECK_POOL) else "job"
    jobs = messages.plural(len(per_job), noun)
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
    fields["details"] = detail_lines(per_job, noun)
    return messages.body(incident.id, INCIDENT, now, text, path, **fields)


def pool_jobs(pool: str, jobs: str = "jobs") -> str:
    """ "12 jobs needing `linux,db`"; jobs without labels run anywhere.
    A pool of checks: "5 checks labelled `db`"."""
    if pool.startswith(CHECK_POOL):
        labels = pool.removeprefix(CHECK_POOL)
        jobs = jobs.replace("jobs", "checks")
        return f"{jobs} labelled `{labels}`" if labels else f"{jobs} without labels"
    return f"{jobs} needing `{pool}`" if pool else f"{jobs} without labels"


def detail_lines(per_job: dict[str, Any], noun: str = "job") -> list[str]:
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
        lines = [*lines[:MAX_DETAILS], f"... and {messages.plural(more, f'more {noun}')}"]
    return lines
