"""An execution: one attempt to run a job for one scheduled instant, and the
idempotency keys of triggered runs."""

from datetime import timedelta

from django.db import models

from core import tracing


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
    QUEUED = "queued"
    STATES = [
        (QUEUED, "queued"),
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
    # Not finished: a queued one waits for its singleton job's live one to end
    # (scheduler.firing.backfill).
    OPEN_STATES = (QUEUED, PENDING, RUNNING)
    FINAL_STATES = (SUCCEEDED, FAILED, TIMED_OUT, LOST, CANCELLED, SKIPPED)
    # A verdict on the job (what its success rate counts): cancelled and
    # skipped runs are none.
    SETTLED_STATES = (SUCCEEDED, FAILED, TIMED_OUT, LOST)

    SCHEDULE = "schedule"
    MANUAL = "manual"
    RETRY = "retry"
    CATCH_UP = "catch_up"
    BACKFILL = "backfill"
    REPLAY = "replay"
    CHAIN = "chain"
    REGISTER = "register"
    WEBHOOK = "webhook"
    TRIGGERS = [
        (SCHEDULE, "schedule"),
        (MANUAL, "manual"),
        (RETRY, "retry"),
        (CATCH_UP, "catch-up"),
        (BACKFILL, "backfill"),
        (REPLAY, "replay of a dead letter"),
        (CHAIN, "chain: an upstream job's run settled"),
        (REGISTER, "register: a runner started (run on register)"),
        (WEBHOOK, "webhook: the job's webhook URL was called"),
    ]

    job = models.ForeignKey(
        "scheduler.Job",
        on_delete=models.CASCADE,
        related_name="executions",
        db_index=False,  # the indexes led by job_id serve its lookups (exec_job_history)
    )
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
        db_index=False,  # exec_runner_state (runner, state) serves its lookups
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
    pinned_to = models.CharField(
        max_length=200,
        blank=True,
        default="",
        db_default="",
        help_text="A run of a run-on-all job: the name of the one runner that may claim it.",
    )
    upstream = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,  # the partial index exec_upstream serves its lookups
        help_text="The run whose end started this one (trigger chain).",
    )
    log_size = models.PositiveBigIntegerField(default=0)
    log_truncated = models.BooleanField(default=False)
    env = models.JSONField(
        default=dict,
        db_default={},
        blank=True,
        help_text="Set by a manual trigger: added to the job's env for this run.",
    )
    requires_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Queued until its job's requirements are met, at most until then "
        "(requires_policy wait); empty otherwise.",
    )
    # Drawn when the execution is created (a retry continues its run's
    # trace, core.tracing.continued); empty for one stored before trace
    # contexts, whose assignment carries none.
    traceparent = models.CharField(
        max_length=55,
        blank=True,
        default=tracing.new_traceparent,
        db_default="",
        help_text="The run's W3C trace context: the job's TRACEPARENT.",
    )

    class Meta:
        ordering = ["-scheduled_for", "-attempt"]
        permissions = [
            ("cancel_execution", "Can cancel an execution"),
            ("retry_execution", "Can retry an execution"),
        ]
        constraints = [
            # Invariant 1, exactly-once triggering: one row per (job, instant,
            # attempt), however many scheduler loops race; a run-on-all job
            # has one per runner it is pinned to (`pinned_to` is empty
            # otherwise, so the others have one row).
            models.UniqueConstraint(
                fields=["job", "scheduled_for", "attempt", "pinned_to"], name="execution_once"
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
            # Retention: finished executions, oldest first (scheduler.housekeeping.retention).
            models.Index(fields=["finished_at"], name="exec_finished"),
            # The management API's execution list of one job, newest first
            # (control.executions_api pages by id).
            models.Index(fields=["job", "-id"], name="exec_job_newest"),
            # A trigger's backpressure: how many executions of the job wait.
            models.Index(
                fields=["job"], condition=models.Q(state="pending"), name="exec_job_pending"
            ),
            # Backfills of singleton jobs waiting their turn, oldest first; runs
            # waiting for their job's requirements (scheduler.runs.requirements:
            # whether any waits, at every success), a few queued rows read.
            models.Index(
                fields=["job", "scheduled_for"],
                condition=models.Q(state="queued"),
                name="exec_job_queued",
            ),
            # The dashboard's failure heat-map: settled runs per state and hour
            # of the last day, and the jobs failing most, counted from the
            # index alone (dashboard.run_stats). Partial on SETTLED_STATES:
            # SQLite uses it only for queries that name that very IN list,
            # so it never lures a "newest runs of a job" query into a sort.
            models.Index(
                fields=["state", "finished_at", "job"],
                condition=models.Q(state__in=["succeeded", "failed", "timed_out", "lost"]),
                name="exec_state_finished",
            ),
            # One job's settled runs by outcome and time: the job page's
            # success rate, its row on the heat-map (dashboard.run_stats).
            models.Index(
                fields=["job", "state", "finished_at"],
                condition=models.Q(state__in=["succeeded", "failed", "timed_out", "lost"]),
                name="exec_job_state_finished",
            ),
            # A pruned run's chained runs (scheduler.housekeeping.retention) and the
            # database's foreign key check when a run is deleted. Partial:
            # nearly every run has no upstream, and those need no entry.
            models.Index(
                fields=["upstream"],
                condition=models.Q(upstream__isnull=False),
                name="exec_upstream",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id}@{self.scheduled_for:%Y-%m-%dT%H:%M:%SZ}#{self.attempt}"

    @property
    def duration(self) -> timedelta | None:
        if self.claimed_at and self.finished_at:
            return self.finished_at - self.claimed_at
        return None


class TriggerKey(models.Model):
    """An idempotency key of a manual trigger: the same key for the same job
    within IDEMPOTENCY_WINDOW answers the execution it first created.

    The unique (job, key) decides between concurrent triggers on any number
    of web processes; an expired key is deleted before its reuse
    (scheduler.firing.triggers), and goes with its execution (retention).
    """

    job = models.ForeignKey("scheduler.Job", on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    # Empty only inside the trigger's own transaction (see scheduler.firing.triggers).
    execution = models.ForeignKey(Execution, null=True, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField()

    class Meta:
        default_permissions = ()  # internal bookkeeping: not in the admin
        constraints = [
            # One execution per key and job, whichever web process asks first.
            models.UniqueConstraint(fields=["job", "key"], name="triggerkey_once"),
        ]

    def __str__(self) -> str:
        return f"{self.job_id}:{self.key}"
