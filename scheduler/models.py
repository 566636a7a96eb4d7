from django.conf import settings
from django.db import models
from django.utils import timezone

from calendars.validators import validate_timezone


def default_labels():
    return []


class Job(models.Model):
    """A command to run on a schedule, gated by an optional calendar."""

    SKIP = "skip"
    DEFER = "defer"
    CALENDAR_POLICIES = [(SKIP, "skip blocked occurrences"), (DEFER, "defer to next allowed")]

    RUN_ONCE = "run_once"
    RUN_ALL = "run_all"
    MISFIRE_POLICIES = [
        (RUN_ONCE, "run once, then continue from now"),
        (SKIP, "skip missed occurrences"),
        (RUN_ALL, "run every missed occurrence (capped)"),
    ]

    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    schedule = models.CharField(
        max_length=200,
        help_text='5-field cron ("30 2 * * *"), a macro (@daily) or "@every 5m".',
    )
    timezone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[validate_timezone],
        help_text="IANA timezone the schedule is read in.",
    )
    command = models.TextField(help_text="Shell command the runner executes (sh -c).")
    env = models.JSONField(default=dict, blank=True, help_text="Extra environment variables.")
    calendar = models.ForeignKey(
        "calendars.Calendar",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="jobs",
    )
    calendar_policy = models.CharField(max_length=10, choices=CALENDAR_POLICIES, default=SKIP)
    labels = models.JSONField(
        default=default_labels,
        blank=True,
        help_text="A runner must carry all of these labels to run the job.",
    )
    singleton = models.BooleanField(
        default=False, help_text="Never run two executions of this job at once."
    )
    timeout = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds before the run is killed (empty: no limit)."
    )
    retries = models.PositiveIntegerField(default=0, help_text="Retries after a failed run.")
    retry_backoff = models.PositiveIntegerField(
        default=30, help_text="Seconds before the first retry; doubles each time."
    )
    misfire_policy = models.CharField(max_length=10, choices=MISFIRE_POLICIES, default=RUN_ONCE)
    enabled = models.BooleanField(default=True)
    paused_at = models.DateTimeField(
        null=True, blank=True, help_text="Set by an operator's pause; apply leaves it alone."
    )
    next_run_at = models.DateTimeField(
        null=True, blank=True, help_text="Next scheduled instant (UTC), calendar applied."
    )
    last_scheduled_at = models.DateTimeField(
        null=True, blank=True, help_text="Last instant the schedule fired for."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        indexes = [
            # The trigger tick: "enabled, unpaused jobs whose next_run_at <= now".
            models.Index(
                fields=["next_run_at"],
                condition=models.Q(enabled=True, paused_at__isnull=True),
                name="job_due",
            ),
        ]

    def __str__(self):
        return self.name

    @property
    def is_active(self):
        return self.enabled and self.paused_at is None

    def next_fire_after(self, after):
        """The first fire instant strictly after `after`, calendar applied."""
        from scheduler.cron import next_fire

        return next_fire(
            self.schedule, self.timezone, self.calendar_rules(), after, self.calendar_policy
        )

    def calendar_rules(self, shared=None):
        """The calendar as CalendarRules, built once per instance (it costs
        queries); `shared` is a {calendar id: rules} dict reused across jobs."""
        if not self.calendar_id:
            return None
        cached = getattr(self, "_calendar_rules", None)
        if cached is None or cached[0] != self.calendar_id:
            rules = shared.get(self.calendar_id) if shared is not None else None
            if rules is None:
                rules = self.calendar.rules()
                if shared is not None:
                    shared[self.calendar_id] = rules
            self._calendar_rules = (self.calendar_id, rules)
        return self._calendar_rules[1]

    def reschedule(self, now):
        """Point next_run_at at the first instant after `now` (after an edit).

        What the loop created ahead of an instant still to come is withdrawn
        first: the edited job decides whether that instant fires.
        """
        self.withdraw_ahead(now)
        self.next_run_at = self.next_fire_after(now) if self.is_active else None

    def withdraw_ahead(self, now):
        """Delete the executions the loop created ahead of their instant
        (`scheduler.ticks.FIRE_LEAD`) that are not yet due; returns how many."""
        if self.pk is None:
            return 0
        withdrawn, _ = Execution.objects.filter(
            job=self,
            state=Execution.PENDING,
            trigger=Execution.SCHEDULE,
            attempt=1,
            run_after__gt=now,
        ).delete()
        return withdrawn

    def clean(self):
        from django.core.exceptions import ValidationError

        from scheduler.cron import ScheduleError, never_fires_reason, parse_schedule

        try:
            parse_schedule(self.schedule)
        except ScheduleError as e:
            raise ValidationError({"schedule": str(e)}) from None
        try:
            validate_timezone(self.timezone)
        except ValidationError:
            return  # the field validator reports it
        reason = never_fires_reason(
            self.schedule,
            self.timezone,
            self.calendar_rules(),
            timezone.now(),
            policy=self.calendar_policy,
        )
        if reason:
            raise ValidationError({"schedule": reason})


class Execution(models.Model):
    """One attempt to run a job for one scheduled instant."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    STATES = [
        (PENDING, "pending"),
        (RUNNING, "running"),
        (SUCCEEDED, "succeeded"),
        (FAILED, "failed"),
        (TIMED_OUT, "timed out"),
        (LOST, "lost"),
        (CANCELLED, "cancelled"),
        (SKIPPED, "skipped"),
    ]
    ACTIVE_STATES = (PENDING, RUNNING)
    FINAL_STATES = (SUCCEEDED, FAILED, TIMED_OUT, LOST, CANCELLED, SKIPPED)

    SCHEDULE = "schedule"
    MANUAL = "manual"
    RETRY = "retry"
    CATCH_UP = "catch_up"
    TRIGGERS = [
        (SCHEDULE, "schedule"),
        (MANUAL, "manual"),
        (RETRY, "retry"),
        (CATCH_UP, "catch-up"),
    ]

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="executions")
    scheduled_for = models.DateTimeField(help_text="The instant this run belongs to (UTC).")
    attempt = models.PositiveIntegerField(default=1)
    trigger = models.CharField(max_length=10, choices=TRIGGERS, default=SCHEDULE)
    state = models.CharField(max_length=10, choices=STATES, default=PENDING)
    # Copied from the job at creation, so the singleton index needs no join.
    singleton = models.BooleanField(default=False)
    run_after = models.DateTimeField(help_text="Not dispatched before this instant.")
    runner = models.ForeignKey(
        "runners.Runner",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="executions",
    )
    session = models.CharField(max_length=64, blank=True, help_text="Runner session holding it.")
    lease = models.PositiveBigIntegerField(
        default=0, help_text="Fencing token: grows with every claim."
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    lost_reason = models.CharField(max_length=32, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    log_size = models.PositiveBigIntegerField(default=0)
    log_truncated = models.BooleanField(default=False)

    class Meta:
        ordering = ["-scheduled_for", "-attempt"]
        constraints = [
            # Invariant 1, exactly-once triggering: one row per (job, instant, attempt),
            # however many scheduler loops race.
            models.UniqueConstraint(
                fields=["job", "scheduled_for", "attempt"], name="execution_once"
            ),
            # Invariant 2, singleton jobs never overlap: at most one live
            # (pending or running) execution of a singleton job.
            models.UniqueConstraint(
                fields=["job"],
                condition=models.Q(singleton=True, state__in=["pending", "running"]),
                name="execution_singleton_live",
            ),
        ]
        indexes = [
            # Dispatch: pending executions, oldest first. In the claim's own
            # order, so a claim reads the first few rows instead of sorting
            # every ready one.
            models.Index(
                fields=["run_after", "scheduled_for", "id"],
                condition=models.Q(state="pending"),
                name="exec_pending_order",
            ),
            # Reaper: running executions whose lease expired.
            models.Index(
                fields=["lease_expires_at"],
                condition=models.Q(state="running"),
                name="exec_running_lease",
            ),
            # Job page history and the dashboard's "last results per job".
            models.Index(fields=["job", "-scheduled_for"], name="exec_job_history"),
            # Executions held by a runner (heartbeat, takeover release).
            models.Index(fields=["runner", "state"], name="exec_runner_state"),
            # Retention: finished executions, oldest first (scheduler.retention).
            models.Index(fields=["finished_at"], name="exec_finished"),
        ]

    def __str__(self):
        return f"{self.job_id}@{self.scheduled_for:%Y-%m-%dT%H:%M:%SZ}#{self.attempt}"

    @property
    def duration(self):
        if self.claimed_at and self.finished_at:
            return self.finished_at - self.claimed_at
        return None


class LogChunk(models.Model):
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="log_chunks")
    seq = models.PositiveIntegerField()
    data = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["execution", "seq"]
        constraints = [
            # `seq` makes a retried log append idempotent.
            models.UniqueConstraint(fields=["execution", "seq"], name="logchunk_seq_unique"),
        ]
        indexes = [
            # Log retention: the oldest chunks first (scheduler.retention).
            models.Index(fields=["created_at"], name="logchunk_created"),
        ]

    def __str__(self):
        return f"{self.execution_id}#{self.seq}"


LOG_TRUNCATED_MARKER = "\n[croniq: log truncated at {limit} bytes]\n"


def log_limit():
    return settings.CRONIQ_LOG_LIMIT
