"""Channels, rules, mutes, and the two tables of the outbox (docs/design.md §9).

An Event is a fact ("billing-sync failed for good"), written in the
transaction of the state change that caused it (`scheduler.runs.events`). The
notifier routes each event through the rules once: every (rule, channel) it
matches becomes a Notification, the unit of delivery, whose id is the
`Croniq-Delivery` id receivers deduplicate on. Each try to deliver one is a
Delivery row: the delivery log.
"""

import uuid
from typing import Any

from django.db import models

from core.ownership import Owned


def empty_list() -> list[Any]:
    return []


def empty_dict() -> dict[str, Any]:
    return {}


class Event(models.Model):
    name = models.CharField(max_length=32)
    at = models.DateTimeField()
    job = models.ForeignKey(
        "scheduler.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    execution = models.ForeignKey(
        "scheduler.Execution", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    runner = models.ForeignKey(
        "runners.Runner", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # What the event says beyond its subjects (streak, duration, labels...),
    # and their names as they were, so the message survives their deletion.
    data = models.JSONField(default=empty_dict, blank=True)
    # Once-only events (a detector's "this execution is slow"): a second
    # event with the same key is not recorded.
    key = models.CharField(max_length=200, null=True, blank=True, unique=True)
    routed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(
                fields=["id"], condition=models.Q(routed_at__isnull=True), name="event_unrouted"
            ),
            models.Index(fields=["at"], name="event_at"),
        ]

    def __str__(self) -> str:
        return f"{self.name} at {self.at:%Y-%m-%d %H:%M:%S}"


class Channel(Owned):
    EMAIL = "email"
    WEBHOOK = "webhook"
    SLACK = "slack"
    KINDS = [(EMAIL, "email"), (WEBHOOK, "webhook (signed JSON)"), (SLACK, "chat webhook")]
    # The `slack` kind speaks Slack's incoming-webhook JSON (which Mattermost
    # and Rocket.Chat accept) unless `format` says otherwise.
    FORMATS = [
        ("slack", "Slack / Mattermost / Rocket.Chat"),
        ("teams", "Microsoft Teams"),
        ("discord", "Discord"),
    ]

    kind = models.CharField(max_length=10, choices=KINDS)
    format = models.CharField(max_length=10, choices=FORMATS, default="slack", blank=True)
    to = models.JSONField(
        default=empty_list, blank=True, help_text="Email addresses (email channels)."
    )
    url = models.CharField(
        max_length=2000,
        blank=True,
        help_text="Where to POST (webhook and chat channels); may hold ${ENV_NAME} parts.",
    )
    secret = models.CharField(
        max_length=500,
        blank=True,
        help_text="HMAC secret of a webhook, as a reference: ${ENV_NAME} or file:/path.",
    )
    headers = models.JSONField(
        default=empty_dict, blank=True, help_text="Extra HTTP headers; values may use ${ENV_NAME}."
    )
    timeout = models.FloatField(default=5.0, help_text="Seconds before a delivery try gives up.")
    username = models.CharField(
        max_length=80,
        blank=True,
        help_text="Chat channels: the name messages are posted as (not Teams).",
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def config(self) -> dict[str, Any]:
        """The plain dict `notifications.channels` validates and sends with."""
        if self.kind == self.EMAIL:
            return {"to": list(self.to)}
        config = {"url": self.url, "timeout": self.timeout}
        if self.kind == self.WEBHOOK:
            if self.secret:
                config["secret"] = self.secret
            if self.headers:
                config["headers"] = dict(self.headers)
        else:
            config["format"] = self.format or "slack"
            if self.username:
                config["username"] = self.username
        return config


class Rule(Owned):
    events = models.JSONField(default=empty_list, help_text="Event names this rule routes.")
    jobs = models.CharField(
        max_length=200, blank=True, help_text='Job name glob ("billing-*"); empty: any job.'
    )
    checks = models.CharField(
        max_length=200,
        blank=True,
        help_text='Check name glob ("backup-*"): only check events of these checks; '
        "empty: any check.",
    )
    labels = models.JSONField(
        default=empty_list, blank=True, help_text="Only jobs (or runners) carrying all of these."
    )
    calendar = models.ForeignKey(
        "calendars.Calendar", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    owner = models.CharField(max_length=100, blank=True, help_text="Only jobs of this owner.")
    fallback = models.BooleanField(
        default=False, help_text="Routes only events that no other rule matched."
    )
    failures_in_a_row = models.PositiveIntegerField(
        default=1, help_text="job.failing: notify when a job's streak reaches this."
    )
    slow_factor = models.FloatField(
        null=True, blank=True, help_text="job.slow: times the job's p95 duration (default 3)."
    )
    grace = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Seconds before job.missed, labels.unserved and scheduler.stalled count.",
    )
    throttle = models.PositiveIntegerField(
        default=0, help_text="Seconds: at most one notification per job within this."
    )
    digest = models.BooleanField(
        default=False, help_text="Collect into one message a day instead of one per event."
    )
    channels = models.ManyToManyField(Channel, related_name="rules")
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Mute(models.Model):
    """Silence a rule, a job, or (neither set) everything, until a time."""

    rule = models.ForeignKey(Rule, null=True, blank=True, on_delete=models.CASCADE)
    job = models.ForeignKey(
        "scheduler.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    until = models.DateTimeField()
    note = models.TextField(help_text="Why, for whoever wonders tomorrow.")
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-until"]

    def __str__(self) -> str:
        subject = self.rule or self.job or "everything"
        return f"{subject} muted until {self.until:%Y-%m-%d %H:%M}"


class Notification(models.Model):
    PENDING = "pending"  # to deliver, at next_attempt_at
    DELIVERED = "delivered"
    GIVEN_UP = "given_up"  # kept failing past CRONIQ_NOTIFY_GIVE_UP
    SUPPRESSED = "suppressed"  # throttled; summed up in the next one delivered
    MUTED = "muted"
    GROUPED = "grouped"  # folded into an incident.grouped notification
    DIGEST = "digest"  # waits for its rule's daily digest
    DIGESTED = "digested"
    STATES = [
        (PENDING, "pending"),
        (DELIVERED, "delivered"),
        (GIVEN_UP, "given up"),
        (SUPPRESSED, "suppressed"),
        (MUTED, "muted"),
        (GROUPED, "grouped"),
        (DIGEST, "waiting for digest"),
        (DIGESTED, "sent in a digest"),
    ]

    # The delivery id (`Croniq-Delivery`): the same on every retry.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    event = models.ForeignKey(
        Event, null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    name = models.CharField(max_length=32, help_text="Event name, or incident.grouped.")
    rule = models.ForeignKey(
        Rule, null=True, blank=True, on_delete=models.SET_NULL, related_name="notifications"
    )
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="notifications")
    job = models.ForeignKey(
        "scheduler.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # What this one was folded into: its incident.grouped notification, its
    # digest, or (suppressed) the notification that summed it up.
    group = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="members"
    )
    # What a failure is grouped by (notifications.incidents): the job's
    # labels, sorted and comma-joined (its runner pool; "" for a job without
    # labels), and the runner it ran on. An incident.grouped notification
    # holds its one key: a runner's name, or (runner_name "") a pool. A
    # runner.* notification has its runner's name (its throttle's subject).
    pool = models.CharField(max_length=500, blank=True)
    runner_name = models.CharField(max_length=100, blank=True)
    # A check.* notification's check (its throttle's subject).
    check_name = models.CharField(max_length=100, blank=True)
    # The docs/design.md §9 body, fixed when routed so every retry sends the same.
    message = models.JSONField(default=empty_dict)
    state = models.CharField(max_length=10, choices=STATES, default=PENDING)
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # A notifier delivering it holds it until then (several loops never
    # deliver the same notification at once).
    claimed_until = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=100, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(state="pending"),
                name="notification_due",
            ),
            models.Index(fields=["rule", "job", "-created_at"], name="notification_throttle"),
            models.Index(fields=["created_at"], name="notification_created"),
            # The open incident of a pool or runner, looked up per failure
            # routed (notifications.incidents).
            models.Index(
                fields=["channel", "pool", "runner_name"],
                condition=models.Q(name="incident.grouped"),
                name="notification_incident",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} -> {self.channel_id} ({self.state})"


class Delivery(models.Model):
    """One try to deliver a notification: the delivery log."""

    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, related_name="deliveries"
    )
    attempt = models.PositiveIntegerField()
    at = models.DateTimeField()
    ok = models.BooleanField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    latency = models.FloatField(help_text="Seconds the try took.")

    class Meta:
        ordering = ["-at"]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"{self.notification_id} #{self.attempt}: {'ok' if self.ok else self.error}"
