"""Checks and their pings (docs/design.md §12): jobs Croniq does not run
report in, and Croniq notices when they stop.

The state machine is `checks.states` (pure); these rows hold its state,
and the two deadlines the loop looks for (`next_expected_at` of an up
check, `down_at` of an up or late one), each behind a partial index, so
finding the overdue among many checks reads only them.
"""

import secrets
from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from calendars.validators import validate_timezone
from checks import states
from core.ownership import Owned

# The longest period or grace: a year (a yearly job may ping once a year).
LONGEST = 366 * 24 * 3600
# How much of a ping's body is kept (docs/design.md §12: 100 KB).
MAX_BODY = 100 * 1024


def new_token() -> str:
    """An unguessable ping token: 32 random bytes, URL-safe (43 characters)."""
    return secrets.token_urlsafe(32)


def empty_list() -> list[Any]:
    return []


class Check(Owned):
    STATES = [
        (states.NEW, "new (never pinged)"),
        (states.UP, "up"),
        (states.LATE, "late (grace running)"),
        (states.DOWN, "down"),
        (states.PAUSED, "paused"),
    ]

    description = models.TextField(blank=True)
    labels = models.JSONField(default=empty_list, blank=True)
    schedule = models.CharField(
        max_length=200,
        blank=True,
        help_text='When pings are expected: 5-field cron ("30 2 * * *") or a macro '
        "(@daily); leave empty to use a period.",
    )
    timezone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[validate_timezone],
        help_text="IANA timezone the schedule is read in.",
    )
    period = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(LONGEST)],
        help_text="Seconds between pings, for a check without a schedule.",
    )
    grace = models.PositiveIntegerField(
        default=60,
        validators=[MaxValueValidator(LONGEST)],
        help_text="Seconds a ping may be late before the check is down.",
    )
    token = models.CharField(
        max_length=64,
        unique=True,  # the ping's only lookup: one index probe, found or not
        default=new_token,
        editable=False,
        help_text="The secret in the check's ping URL.",
    )
    state = models.CharField(max_length=10, choices=STATES, default=states.NEW)
    last_ping_at = models.DateTimeField(null=True, blank=True)
    last_start_at = models.DateTimeField(null=True, blank=True)
    next_expected_at = models.DateTimeField(null=True, blank=True)
    # next_expected_at + grace while the check is up or late: when it goes down.
    down_at = models.DateTimeField(null=True, blank=True)
    # Pings received, numbering them (`Ping.n`): retention keeps the last N.
    n_pings = models.PositiveIntegerField(default=0)
    pruned_through = models.PositiveIntegerField(default=0)
    # The flood limit's fixed window (its start, in whole seconds since the
    # epoch over the window length) and the pings counted in it.
    rate_window = models.BigIntegerField(default=0)
    rate_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["name"]
        indexes = [
            # The loop's "who is late now": up checks past their due instant.
            models.Index(
                fields=["next_expected_at"],
                condition=models.Q(state=states.UP),
                name="check_due",
            ),
            # The loop's "who is down now": up or late checks past their grace.
            models.Index(
                fields=["down_at"],
                condition=models.Q(state__in=[states.UP, states.LATE]),
                name="check_down_due",
            ),
        ]
        constraints = [
            # A check is timed by exactly one of a schedule and a period.
            models.CheckConstraint(
                condition=(models.Q(schedule="") & models.Q(period__isnull=False))
                | (~models.Q(schedule="") & models.Q(period__isnull=True)),
                name="check_schedule_or_period",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def timing(self) -> states.Timing:
        return states.timing_of(self.schedule, self.timezone, self.period, self.grace, self.name)

    def status(self) -> states.Status:
        return states.Status(
            state=self.state,
            last_ping_at=self.last_ping_at,
            last_start_at=self.last_start_at,
            next_expected_at=self.next_expected_at,
            down_at=self.down_at,
        )

    def set_status(self, status: states.Status) -> None:
        self.state = status.state
        self.last_ping_at = status.last_ping_at
        self.last_start_at = status.last_start_at
        self.next_expected_at = status.next_expected_at
        self.down_at = status.down_at


class Ping(models.Model):
    KINDS = [
        (states.SUCCESS, "success"),
        (states.START, "start"),
        (states.FAIL, "fail"),
        (states.EXIT, "exit status"),
        (states.LOG, "log"),
    ]

    # Not `check`: a field by that name would hide Model.check(), Django's system checks.
    subject = models.ForeignKey(
        Check, on_delete=models.CASCADE, related_name="pings", verbose_name="check"
    )
    n = models.PositiveIntegerField(help_text="The check's ping number, counting from 1.")
    kind = models.CharField(max_length=10, choices=KINDS)
    exit_status = models.PositiveSmallIntegerField(null=True, blank=True)
    received_at = models.DateTimeField()
    body = models.TextField(blank=True)
    body_truncated = models.BooleanField(
        default=False, help_text="The body was longer than 100 KB: only its start is kept."
    )
    remote_addr = models.CharField(max_length=45, blank=True)
    user_agent = models.CharField(max_length=200, blank=True)
    duration = models.DurationField(
        null=True, blank=True, help_text="Since the check's last start ping."
    )

    class Meta:
        ordering = ["-received_at", "-id"]
        indexes = [
            # A check's pings newest first (admin, API) and retention's
            # "older than the last N" delete.
            models.Index(fields=["subject", "n"], name="ping_check_n"),
        ]

    def __str__(self) -> str:
        return f"{self.subject_id} #{self.n} {self.kind}"
