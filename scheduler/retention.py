"""History retention: finished executions and their logs do not pile up forever.

Executions finished more than CRONIQ_EXECUTION_RETENTION_DAYS ago are deleted
with their logs; the logs of executions finished more than the shorter
CRONIQ_LOG_RETENTION_DAYS ago are deleted on their own (the run stays in the
history, without its output). Ages count from `finished_at`.

Never deleted, whatever their age:
- live executions (pending, running): only finished ones qualify;
- every attempt of each job's latest finished instant: the admin's "last
  result" and the dashboard read it however long ago the job last ran;
- the attempts of an instant that still has a live attempt: the retry policy
  counts them (`lifecycle.retry_delay`).
Nothing else reads old executions: the trigger path decides what fires from
`Job.next_run_at` / `last_scheduled_at` alone, so deleting old rows can never
make an old instant fire again, and the singleton index only covers live rows.

Work goes in batches of one short transaction each, oldest first, so the web
process and the loop never wait long on a pruner. The loop does a bounded
share every housekeeping pass (`prune_step`); `manage.py prune` drains a
backlog. Several pruners may run at once: on PostgreSQL each batch skips the
rows another one holds; on SQLite IMMEDIATE transactions serialise them.
"""

from dataclasses import dataclass
from datetime import timedelta
from itertools import count

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef

import audit
from scheduler.models import Execution, LogChunk

# Rows per transaction: on SQLite a batch holds the database's write lock,
# so it must stay short (a batch of 1,000 executions with their logs takes a
# few milliseconds to tens of milliseconds; bench/prune.py).
BATCH_SIZE = 1000
# The loop's share per housekeeping pass (every few seconds): one batch of
# logs and one of executions, so a tick never waits long on pruning.
LOOP_BATCHES = 1
PRUNED_COUNTER = "croniq_history_pruned_total"


@dataclass
class Pruned:
    executions: int = 0
    logs: int = 0  # log chunks

    def __add__(self, other):
        return Pruned(self.executions + other.executions, self.logs + other.logs)

    @property
    def total(self):
        return self.executions + self.logs


def execution_cutoff(now):
    return now - timedelta(days=settings.CRONIQ_EXECUTION_RETENTION_DAYS)


def log_cutoff(now):
    """A log never outlives its execution, whatever the two settings say."""
    days = min(settings.CRONIQ_LOG_RETENTION_DAYS, settings.CRONIQ_EXECUTION_RETENTION_DAYS)
    return now - timedelta(days=days)


def expired_executions(now):
    """Finished executions past their retention that nothing still needs."""
    later_finished = Execution.objects.filter(
        job_id=OuterRef("job_id"),
        scheduled_for__gt=OuterRef("scheduled_for"),
        state__in=Execution.FINAL_STATES,
    )
    live_attempt = Execution.objects.filter(
        job_id=OuterRef("job_id"),
        scheduled_for=OuterRef("scheduled_for"),
        state__in=Execution.ACTIVE_STATES,
    )
    return (
        Execution.objects.filter(
            state__in=Execution.FINAL_STATES, finished_at__lt=execution_cutoff(now)
        )
        .filter(Exists(later_finished))
        .exclude(Exists(live_attempt))
    )


def expired_logs(now):
    """Log chunks of executions finished before the log retention.

    Read through the chunks' `created_at` index: a chunk is written before its
    execution finishes, so every expired chunk lies below the cutoff, and a
    pass that finds nothing reads no history.
    """
    cutoff = log_cutoff(now)
    return LogChunk.objects.filter(
        created_at__lt=cutoff,
        execution__finished_at__lt=cutoff,
        execution__state__in=Execution.FINAL_STATES,
    )


def prune(now, *, batch_size=BATCH_SIZE, max_batches=None):
    """Delete expired logs, then expired executions (with their logs), oldest
    first, one transaction per batch. `max_batches` bounds the batches of each
    kind (None: until nothing is left). Returns a Pruned."""
    pruned = Pruned()
    for batch in (log_batch, execution_batch):
        for _ in count() if max_batches is None else range(max_batches):
            done, rows = batch(now, batch_size)
            pruned += done
            if rows < batch_size:
                break
    return pruned


def prune_step(now):
    """The loop's bounded share of pruning; returns how many rows went."""
    return prune(now, batch_size=BATCH_SIZE, max_batches=LOOP_BATCHES).total


def would_prune(now):
    """What `prune(now)` would delete, deleting nothing (`prune --dry-run`).
    The logs counted include those of the expired executions."""
    return Pruned(executions=expired_executions(now).count(), logs=expired_logs(now).count())


def log_batch(now, batch_size):
    with transaction.atomic():
        ids = first_ids(expired_logs(now).order_by("created_at", "id"), batch_size)
        if ids:
            LogChunk.objects.filter(id__in=ids).delete()
            count_pruned(logs=len(ids))
    return Pruned(logs=len(ids)), len(ids)


def execution_batch(now, batch_size):
    with transaction.atomic():
        ids = first_ids(expired_executions(now).order_by("finished_at", "id"), batch_size)
        if not ids:
            return Pruned(), 0
        # The logs go with their executions (the cascade deletes them by
        # execution id, without loading them).
        _, deleted = Execution.objects.filter(id__in=ids).delete()
        done = Pruned(
            executions=deleted.get(Execution._meta.label, 0),
            logs=deleted.get(LogChunk._meta.label, 0),
        )
        count_pruned(executions=done.executions, logs=done.logs)
    return done, len(ids)


def first_ids(rows, batch_size):
    """The first ids of `rows`, locked; rows another pruner holds are skipped
    (PostgreSQL). SQLite's IMMEDIATE transactions serialise writers."""
    if connection.features.has_select_for_update_skip_locked:
        rows = rows.select_for_update(skip_locked=True, of=("self",))
    return list(rows.values_list("id", flat=True)[:batch_size])


def count_pruned(**kinds):
    for kind, amount in kinds.items():
        if amount:
            audit.increment(PRUNED_COUNTER, amount, kind=kind)


def record_pass(pruned, now, actor):
    """One audit event for a whole `manage.py prune` (not one per row)."""
    audit.record(
        "history.pruned",
        actor=actor,
        at=now,
        data={
            "executions": pruned.executions,
            "logs": pruned.logs,
            "executions_finished_before": execution_cutoff(now).isoformat(),
            "logs_finished_before": log_cutoff(now).isoformat(),
        },
    )
