"""Dead letters: executions that exhausted their retries (docs/design.md §10).

An attempt that failed, timed out or was lost with no retry to follow lands
here, in the transaction that settles it (`lifecycle.after_final`), with its
reason and the last lines of its log. Operators replay or discard it
(`scheduler.triage.dead_letter_actions`).

A row of its own, not fields of Execution: the executions table is the hot
path of every claim and heartbeat and stays narrow; a dead letter has a life
of its own (open, then replayed or discarded) with its own index over the
open ones; and the log tail is copied once, when the attempt gives up, so
the list reads no log chunks and outlives log retention. An open dead
letter keeps its execution from execution retention until an operator
replays or discards it; then it goes with its execution, at the execution's
retention age (`scheduler.housekeeping.retention`).
"""

from collections.abc import Collection
from datetime import datetime

from django.db import models
from django.db.models import Q

from scheduler.housekeeping import rows_by_id
from scheduler.runs.log_chunks import LogChunk
from scheduler.runs.models import Execution

# The log tail kept: the last lines, at most this many, of at most this many bytes.
TAIL_LINES = 20
TAIL_BYTES = 4096


class DeadLetter(models.Model):
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    REASONS = [(FAILED, "failed"), (TIMED_OUT, "timed out"), (LOST, "lost")]

    OPEN = "open"
    REPLAYED = "replayed"
    DISCARDED = "discarded"
    STATUSES = [OPEN, REPLAYED, DISCARDED]

    execution = models.OneToOneField(
        "scheduler.Execution",
        on_delete=models.CASCADE,
        related_name="dead_letter",
        help_text="The last attempt, which gave up.",
    )
    reason = models.CharField(max_length=10, choices=REASONS)
    detail = models.TextField(
        blank=True, help_text="The attempt's error, exit code or why it was lost."
    )
    log_tail = models.TextField(blank=True, help_text="The last lines of the attempt's log.")
    landed_at = models.DateTimeField()
    replayed_at = models.DateTimeField(null=True, blank=True)
    replayed_execution = models.ForeignKey(
        "scheduler.Execution",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The execution its replay created.",
    )
    discarded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        # Operator actions beyond viewing; checked through core.permissions.
        permissions = [
            ("replay_deadletter", "Can replay a dead letter"),
            ("discard_deadletter", "Can discard a dead letter"),
        ]
        indexes = [
            # The lists of open dead letters, newest first (API, dashboard).
            models.Index(
                fields=["-id"],
                condition=Q(replayed_at__isnull=True, discarded_at__isnull=True),
                name="deadletter_open",
            ),
        ]

    def __str__(self) -> str:
        return f"dead letter {self.pk} ({self.execution_id})"

    @property
    def status(self) -> str:
        if self.replayed_at is not None:
            return self.REPLAYED
        if self.discarded_at is not None:
            return self.DISCARDED
        return self.OPEN


def with_status(status: str) -> Q:
    """The condition selecting dead letters of `status` (one of STATUSES)."""
    return {
        DeadLetter.OPEN: Q(replayed_at__isnull=True, discarded_at__isnull=True),
        DeadLetter.REPLAYED: Q(replayed_at__isnull=False),
        DeadLetter.DISCARDED: Q(discarded_at__isnull=False),
    }[status]


def land(execution: Execution, now: datetime) -> DeadLetter:
    """File `execution`, a failing attempt that gets no retry, as a dead
    letter. Called inside the transaction that settles it."""
    return DeadLetter.objects.create(
        execution=execution,
        reason=execution.state,
        detail=detail_of(execution),
        log_tail=log_tail(execution.pk),
        landed_at=now,
    )


def detail_of(execution: Execution) -> str:
    parts = []
    if execution.exit_code is not None:
        parts.append(f"exit code {execution.exit_code}")
    if execution.lost_reason:
        parts.append(execution.lost_reason)
    if execution.error:
        parts.append(execution.error)
    return "; ".join(parts)


def log_tail(execution_id: int, lines: int = TAIL_LINES, limit: int = TAIL_BYTES) -> str:
    """The last `lines` lines of an execution's log, at most `limit` bytes
    (its oldest bytes cut), read from its last chunks only."""
    chunks = LogChunk.objects.filter(execution_id=execution_id).order_by("-seq")
    newest_first, size, newlines = [], 0, 0
    for data in chunks.values_list("data", flat=True).iterator(chunk_size=20):
        newest_first.append(data)
        size += len(data.encode("utf-8"))
        newlines += data.count("\n")
        if size >= limit or newlines > lines:
            break  # the older chunks fall outside the tail
    text = "".join(reversed(newest_first))
    tail = "\n".join(text.rstrip("\n").split("\n")[-lines:])
    encoded = tail.encode("utf-8")
    if len(encoded) > limit:
        tail = encoded[-limit:].decode("utf-8", "ignore")
    return tail


def before_executions_deleted(ids: Collection[int]) -> int:
    """Retention deletes executions with one raw DELETE, which runs no
    cascade: their dead letters go first, and a replay pointing at one of
    them forgets it (the dead letter stays replayed). Returns how many
    dead letters went."""
    rows_by_id.clear_where(DeadLetter, "replayed_execution", ids)
    return rows_by_id.delete_where(DeadLetter, "execution", ids)
