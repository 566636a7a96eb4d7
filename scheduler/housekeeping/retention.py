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
  counts them (`lifecycle.retry_delay`);
- an execution with an open dead letter: it stays, and its dead letter with
  it, until an operator replays or discards it (then both go at the
  execution's retention age, counted from its `finished_at` as ever).
Nothing else reads old executions: the trigger path decides what fires from
`Job.next_run_at` / `last_scheduled_at` alone, so deleting old rows can never
make an old instant fire again, and the singleton index only covers live rows.

Work goes in batches of one short transaction each, oldest first, sized by
the time they take (`Pacer`), so the web process and the loop never wait long
on a pruner. The loop does a share bounded in time every housekeeping pass
(`prune_step`); `manage.py prune` drains a backlog, and while it runs the
loop leaves the work to it. Several pruners may run at once: on PostgreSQL
each batch skips the rows another one holds; on SQLite IMMEDIATE
transactions serialise them.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import count

from django.apps import apps
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, QuerySet

import audit
from audit.recording import beat, last_beat
from core import db
from scheduler.housekeeping import rows_by_id
from scheduler.housekeeping.prune_pacing import Pacer, TickWatch, default_pacer, loop_pacer
from scheduler.models import Execution, LogChunk, TriggerKey
from scheduler.triage import dead_letters
from scheduler.triage.dead_letters import DeadLetter

# Between batches a pruner rests as long as the batch took, and on SQLite at
# least this long: a writer that found the lock taken retries after 1, 2, 5,
# 10, 15, 20, 25 ms (SQLite's busy handler) and must then find it free.
SQLITE_PAUSE = 0.05
# The loop's share per housekeeping pass (every few seconds): batches of
# expired executions, then of logs, while they fit in LOOP_BUDGET seconds,
# so a tick never waits long on pruning. While `manage.py prune` drains a
# backlog (its heartbeat is younger than PRUNER_ACTIVE seconds), the loop
# leaves the work to it instead of competing for the same rows.
LOOP_BUDGET = 0.01
LOOP_MAX_BATCHES = 20
PRUNER_BEAT = "history_pruner"
PRUNER_ACTIVE = 10.0
# Batches in a row that delete nothing before a pruner gives up.
STALLED_BATCHES = 3
PRUNED_COUNTER = "croniq_history_pruned_total"


@dataclass
class Pruned:
    executions: int = 0
    logs: int = 0  # log chunks

    def __add__(self, other):
        return Pruned(self.executions + other.executions, self.logs + other.logs)

    @property
    def total(self) -> int:
        return self.executions + self.logs


def execution_cutoff(now: datetime) -> datetime:
    return now - timedelta(days=settings.CRONIQ_EXECUTION_RETENTION_DAYS)


def log_cutoff(now: datetime) -> datetime:
    """A log never outlives its execution, whatever the two settings say."""
    days = min(settings.CRONIQ_LOG_RETENTION_DAYS, settings.CRONIQ_EXECUTION_RETENTION_DAYS)
    return now - timedelta(days=days)


def expired_executions(now: datetime) -> QuerySet:
    """Finished executions past their retention, except each job's latest
    finished instant and those with an open dead letter. (The attempts of an
    instant with a live attempt are set aside per batch: see `live_instants`.)

    Open dead letters are left out in the query, not per batch: they stay
    open as long as nobody acts, and a batch of only kept rows would stop
    the pruner short of every row past them."""
    later_finished = Execution.objects.filter(
        job_id=OuterRef("job_id"),
        scheduled_for__gt=OuterRef("scheduled_for"),
        state__in=Execution.FINAL_STATES,
    )
    # One lookup in the dead letters' unique index on their execution per candidate.
    open_dead_letter = DeadLetter.objects.filter(
        dead_letters.with_status(DeadLetter.OPEN), execution_id=OuterRef("pk")
    )
    return (
        Execution.objects.filter(
            state__in=Execution.FINAL_STATES, finished_at__lt=execution_cutoff(now)
        )
        .filter(Exists(later_finished))
        .exclude(Exists(open_dead_letter))
    )


def live_instants(until: datetime) -> set[tuple[int, datetime]]:
    """{(job id, instant)} of live executions for instants up to `until`.

    Each state is read through its own partial index, so this costs the
    number of live executions, never the history. (A NOT EXISTS over live
    executions in the candidates' query let PostgreSQL compare every
    candidate with every pending execution: 1.2 s a batch with 8,500 pending.)
    """
    pairs = set()
    for state in Execution.ACTIVE_STATES:
        live = Execution.objects.filter(state=state, scheduled_for__lte=until)
        pairs.update(live.values_list("job_id", "scheduled_for"))
    return pairs


def expired_logs(now: datetime) -> QuerySet:
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


def prune(
    now: datetime,
    *,
    batch_size: int | None = None,
    max_batches: int | None = None,
    budget: float | None = None,
    pacer: Pacer | None = None,
    announce: Callable[..., object] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> Pruned:
    """Delete expired executions (with their logs), then the expired logs of
    the executions that stay, oldest first, one transaction per batch.

    Batches are sized by `pacer` (by time; default: the backend's), or hold
    `batch_size` rows each. Each kind goes on until it finds nothing more, or
    after `max_batches` batches. With a `budget` (seconds of `clock`), no
    batch starts that would not end within it, except the first of a call;
    the logs wait while expired executions are left (deleting those deletes
    their logs too). `announce`, a callable giving the wall time, makes this
    pruner beat PRUNER_BEAT (about once a second) so the loop leaves the
    backlog to it. Returns a Pruned.
    """
    if pacer is None:
        pacer = Pacer.fixed(batch_size) if batch_size else default_pacer()
    run = Run(pacer, max_batches, budget, announce, clock, sleep)
    pruned, drained = run.drain(execution_batch, now)
    if drained:
        pruned += run.drain(log_batch, now)[0]
    return pruned


class Run:
    """One call of `prune`: its pacer, budget and pauses."""

    def __init__(self, pacer, max_batches, budget, announce, clock, sleep) -> None:
        self.pacer, self.max_batches = pacer, max_batches
        self.clock, self.sleep, self.announce = clock, sleep, announce
        self.deadline = None if budget is None else clock() + budget
        self.batches = 0  # in this call, both kinds
        self.announced = None
        # By design: SQLite's one writer needs pauses and its WAL checkpoints.
        sqlite = db.on_sqlite()
        self.shortest_pause = SQLITE_PAUSE if sqlite else 0.0
        # On SQLite the pruner moves the WAL back into the database itself,
        # in its pauses: a commit that finds the WAL past its autocheckpoint
        # size (1,000 pages) runs the checkpoint, and that commit must not be
        # a tick's. (A command's pass only: the loop's pass is its own tick.)
        self.checkpoint = sqlite and announce is not None
        self.watch = None if announce is None else TickWatch(announce, clock, sleep)
        self.last_took = None

    def size(self) -> int:
        """Rows for the next batch; 0 when the budget has no room for one."""
        if self.batches == 0 or self.deadline is None:
            return self.pacer.next_size()
        return self.pacer.next_size(self.deadline - self.clock())

    def drain(
        self, batch: Callable[..., tuple[Pruned, int, float]], now: datetime
    ) -> tuple[Pruned, bool]:
        """Batches of one kind; returns (Pruned, whether none are left)."""
        pruned = Pruned()
        stalled = 0
        for number in count():
            if self.max_batches is not None and number == self.max_batches:
                break
            size = self.size()
            if not size:
                break
            self.beat()
            if self.watch is not None:
                estimate = self.pacer.seconds if self.last_took is None else self.last_took
                self.watch.before_batch(estimate)
            started = self.clock()
            done, found, locked = batch(now, size, self.clock)
            took = self.last_took = self.clock() - started
            self.batches += 1
            # Sized by its transaction (what others wait for): the search
            # before it costs about the same whatever the size, and counting
            # it per row would shrink every batch to the smallest.
            self.pacer.record(found, locked)
            pruned += done
            if found < size:
                return pruned, True
            # Nothing deleted: another pruner took these rows first (go on),
            # or they are kept (live attempts): stop after a few such batches.
            stalled = 0 if done.total else stalled + 1
            if stalled == STALLED_BATCHES:
                break
            # Rest as long as the batch took: a pruner never takes more than
            # half of the database's time (or of a small machine's cores).
            pause = max(took, self.shortest_pause)
            if self.deadline is not None and self.clock() + pause > self.deadline:
                break
            if self.checkpoint:
                # Part of the rest: a PASSIVE checkpoint takes no write lock,
                # and the WAL it copies is what the batch wrote (at 1,000,000
                # runs a fifth of the prune's time, on top of its rests).
                started = self.clock()
                wal_checkpoint()
                pause -= self.clock() - started
            if pause > 0:
                self.sleep(pause)
        return pruned, False

    def beat(self) -> None:
        """Tell the loop a pruner is at work (at most once a second)."""
        if self.announce is None:
            return
        at = self.clock()
        if self.announced is None or at - self.announced >= 1.0:
            self.announced = at
            beat(PRUNER_BEAT, self.announce())


def wal_checkpoint() -> None:
    """Copy SQLite's WAL into the database without waiting for anyone
    (PASSIVE): pages a reader still needs stay for the next one. Not
    inside a caller's transaction, which SQLite refuses."""
    if connection.in_atomic_block:
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")


def pruner_active(now: datetime) -> bool:
    """Whether `manage.py prune` beat within PRUNER_ACTIVE seconds of `now`."""
    at = last_beat(PRUNER_BEAT)
    return at is not None and abs((now - at).total_seconds()) < PRUNER_ACTIVE


def prune_step(
    now: datetime, pacer: Pacer | None = None, clock: Callable[[], float] = time.monotonic
) -> int:
    """The loop's bounded share of pruning; returns how many rows went.
    Nothing while `manage.py prune` is at work: it drains the backlog."""
    if pruner_active(now):
        return 0
    return prune(
        now,
        pacer=pacer or loop_pacer(),
        max_batches=LOOP_MAX_BATCHES,
        budget=LOOP_BUDGET,
        clock=clock,
    ).total


def would_prune(now: datetime) -> Pruned:
    """What `prune(now)` would delete, deleting nothing (`prune --dry-run`).
    The logs counted include those of the expired executions."""
    expired = expired_executions(now)
    held = sum(
        expired.filter(job_id=job_id, scheduled_for=instant).count()
        for job_id, instant in live_instants(execution_cutoff(now))
    )
    return Pruned(executions=expired.count() - held, logs=expired_logs(now).count())


def log_batch(
    now: datetime, batch_size: int, clock: Callable[[], float] = time.monotonic
) -> tuple[Pruned, int, float]:
    """One batch of expired log chunks. Returns (Pruned, candidates found,
    seconds its transaction took)."""
    ids = candidate_ids(expired_logs(now).order_by("created_at", "id"), batch_size)
    if not ids:
        return Pruned(), 0, 0.0
    started = clock()
    with transaction.atomic():
        held = rows_by_id.ids_where(LogChunk, "id", ids, lock=True)
        logs = rows_by_id.delete_where(LogChunk, "id", held)
    took = clock() - started
    count_pruned(logs=logs)
    return Pruned(logs=logs), len(ids), took


def execution_batch(
    now: datetime, batch_size: int, clock: Callable[[], float] = time.monotonic
) -> tuple[Pruned, int, float]:
    """One batch of expired executions with their logs. Returns (Pruned,
    candidates found, seconds its transaction took)."""
    rows = expired_executions(now).order_by("finished_at", "id")
    found = list(rows.values_list("id", "job_id", "scheduled_for")[:batch_size])
    if not found:
        return Pruned(), 0, 0.0
    live = live_instants(max(instant for _, _, instant in found))
    ids = [pk for pk, job_id, instant in found if (job_id, instant) not in live]
    started = clock()
    with transaction.atomic():
        # A finished execution never becomes live again; checked anyway,
        # under the lock, so no live row can ever be deleted. (The other
        # exemptions were judged as the candidates were read: only a retry
        # of a long-finished run created in between could change them, and
        # it would at worst see one earlier attempt fewer.)
        held = rows_by_id.ids_where(Execution, "id", ids, states=Execution.FINAL_STATES, lock=True)
        logs = rows_by_id.delete_where(LogChunk, "execution", held)
        let_go_of(held)
        # QuerySet.delete() would load every row to look for cascades (ten
        # times slower, inside the write lock). What points at executions
        # went in let_go_of: a new kind must go there too, or the
        # database's foreign key refuses this delete.
        executions = rows_by_id.delete_where(Execution, "id", held)
    took = clock() - started
    count_pruned(executions=executions, logs=logs)
    return Pruned(executions=executions, logs=logs), len(found), took


def candidate_ids(rows: QuerySet, batch_size: int) -> list[int]:
    """The first ids of `rows`, read before the batch's transaction: the
    search costs most, and on SQLite a transaction holds the write lock."""
    return list(rows.values_list("id", flat=True)[:batch_size])


def let_go_of(ids: list[int]) -> None:
    """Clear what points at these executions before their DELETE, which
    runs no cascade (a pointer left dangling makes the database refuse the
    commit, and every later pass with it): their dead letters and trigger
    keys go, a chained run forgets its upstream, and an app config with a
    `before_executions_deleted(ids)` method clears its own rows (the
    notifications' events)."""
    dead_letters.before_executions_deleted(ids)
    rows_by_id.delete_where(TriggerKey, "execution", ids)
    # Found first, then updated by id: with statistics that say nearly
    # every run has the same upstream (none), SQLite planned the UPDATE
    # filtered on `upstream_id` as a scan of the whole table, once a batch
    # (three quarters of `manage.py prune`'s time at 1,000,000 runs), where
    # the SELECT reads the index.
    chained = rows_by_id.ids_where(Execution, "upstream", ids)
    rows_by_id.clear_where(Execution, "upstream", chained, by="id")
    for config in apps.get_app_configs():
        clear = getattr(config, "before_executions_deleted", None)
        if clear is not None:
            clear(ids)


def count_pruned(**kinds: int) -> None:
    """After the batch's commit: the counter row is shared with other pruners,
    and its lock must not be held for a whole batch."""
    for kind, amount in kinds.items():
        if amount:
            audit.increment(PRUNED_COUNTER, amount, kind=kind)


def record_pass(pruned: Pruned, now: datetime, actor: object) -> None:
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
