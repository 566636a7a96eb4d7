import collections
import itertools
import threading
from collections.abc import Iterable
from contextlib import nullcontext
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, models, transaction
from django.db.models import Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from audit.models import AuditEvent, Counter, Heartbeat
from core import db
from projects import scoping


def actor_of(actor: object) -> tuple[str, str]:
    """(kind, name) for a user, a runner, a (kind, name) pair, or None (system)."""
    if actor is None:
        return AuditEvent.SYSTEM, ""
    if isinstance(actor, tuple):
        return actor
    if getattr(actor, "_meta", None) and actor._meta.label == "runners.Runner":
        return AuditEvent.RUNNER, actor.name
    if hasattr(actor, "get_username"):
        return AuditEvent.USER, actor.get_username()
    return AuditEvent.SYSTEM, str(actor)


def record(
    action: str,
    *,
    target: models.Model | None = None,
    actor: object = None,
    data: dict[str, Any] | None = None,
    at: datetime | None = None,
    counter: tuple[str, dict[str, Any]] | None = None,
) -> AuditEvent:
    """Write one AuditEvent; with `counter=(name, labels)` also bump that
    counter, in the same transaction: a process that dies (or a database
    that restarts) between the two must not leave /metrics one behind the
    audit trail. Inside a caller's transaction it joins it (no savepoint)."""
    event = event_of(action, target=target, actor=actor, data=data, at=at)
    with transaction.atomic(savepoint=False):
        event.save()
        if counter is not None:
            counter_name, labels = counter
            increment(counter_name, 1, **labels)
    return event


def record_many(events: Iterable[AuditEvent]) -> None:
    """Write the AuditEvents `events` (from `event_of`) in a few statements:
    a change of thousands of rows (apply) records one event each."""
    AuditEvent.objects.bulk_create(events, batch_size=500)


def event_of(
    action: str,
    *,
    target: models.Model | None = None,
    actor: object = None,
    data: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> AuditEvent:
    """The AuditEvent `record` writes, unsaved."""
    kind, name = actor_of(actor)
    return AuditEvent(
        at=at or timezone.now(),
        actor_kind=kind,
        actor_name=name[:200],
        action=action,
        target_type=target._meta.label_lower if target is not None else "",
        target_id=str(target.pk) if target is not None else "",
        target_repr=str(target)[:300] if target is not None else "",
        data=data or {},
        project=project_of(target),
    )


def project_of(target: models.Model | None) -> Any:
    """The project of the row an event is about, as the event stores it:
    its own, or its job's (an execution), or its execution's job's (a dead
    letter); "" for a row of no project. When the job is not loaded, the
    INSERT itself reads it (a subquery): the runs' paths, which audit
    executions, make no round trip more."""
    # `__class__`, not type(): a request's user is a lazy object standing in
    # for the row, and says the row's class only that way.
    lookup = scoping.project_lookup(target.__class__) if target is not None else None
    if lookup is None:
        return ""
    row, path = target, lookup.split("__")
    while len(path) > 1 and row._meta.get_field(path[0]).is_cached(row):
        row, path = getattr(row, path[0]), path[1:]
        if row is None:  # a relation it lacks (a mute of no job): no project
            return ""
    if len(path) == 1:
        return getattr(row, path[0]) or ""
    found = type(row)._default_manager.filter(pk=row.pk).values("__".join(path))[:1]
    return Coalesce(Subquery(found), Value(""))  # a row deleted meanwhile: none


def label_value(value: object) -> str:
    """A label value as stored: commas would break the k=v,k=v key."""
    return str(value).replace(",", "_")


def labels_key(labels: dict[str, Any]) -> str:
    return ",".join(f"{k}={label_value(v)}" for k, v in sorted(labels.items()))


# Rows per counter series (see audit.models.Counter).
COUNTER_SHARDS = 8
_threads = itertools.count()
_local = threading.local()


def shard() -> int:
    """This thread's counter shard: the database threads of a process get
    different ones, so their increments never wait for each other."""
    if not hasattr(_local, "shard"):
        _local.shard = next(_threads) % COUNTER_SHARDS
    return _local.shard


# Written by hand: every finish and claim moves a counter, and compiling the
# ORM's F() update cost more than the round trip to the database.
ADD_TO_COUNTER = (
    f"UPDATE {Counter._meta.db_table} SET value = value + %s"
    " WHERE name = %s AND labels = %s AND shard = %s"
)


def increment(name: str, amount: int = 1, **labels: Any) -> None:
    key = labels_key(labels)
    row = shard()
    with connection.cursor() as cursor:
        cursor.execute(ADD_TO_COUNTER, [amount, name, key, row])
        if cursor.rowcount:
            return
    try:
        with transaction.atomic():
            Counter.objects.create(name=name, labels=key, shard=row, value=amount)
    except IntegrityError:
        # Another process created the series between our update and insert.
        with connection.cursor() as cursor:
            cursor.execute(ADD_TO_COUNTER, [amount, name, key, row])


# Histogram buckets (seconds) for latencies persisted in Counter rows.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


def bucket_of(seconds: float) -> str:
    for bound in LATENCY_BUCKETS:
        if seconds <= bound:
            return str(bound)
    return "+Inf"


def observe(name: str, *seconds: float) -> None:
    """Observations: the bucket each falls in (not cumulative), the count, and
    the sum in microseconds (Counter values are integers). Several at once
    move each series once."""
    values = [max(0.0, float(value)) for value in seconds]
    if not values:
        return
    buckets = collections.Counter(bucket_of(value) for value in values)
    # One transaction, so a scrape never sees the bucket without the sum.
    with transaction.atomic():
        for bucket, amount in sorted(buckets.items()):
            increment(f"{name}__bucket", amount, le=bucket)
        increment(f"{name}__count", len(values))
        increment(f"{name}__sum_us", sum(round(value * 1_000_000) for value in values))


SCHEDULER_TICK = "scheduler_tick"


def beat(name: str, now: datetime) -> None:
    """Remember that `name` did its periodic work at `now` (one row per name)."""
    # On SQLite a transaction even for one UPDATE: the scheduler loop's
    # connection then takes the write lock as soon as it is free
    # (croniq_project/sqlite), where a bare statement would sleep in
    # SQLite's busy handler behind the notifier's writes (up to 0.8 s a
    # tick in a burst of deliveries). On PostgreSQL the bare UPDATE is one
    # round trip where BEGIN, UPDATE, COMMIT are three.
    writing = transaction.atomic() if db.on_sqlite() else nullcontext()
    with writing:
        if Heartbeat.objects.filter(name=name).update(at=now):
            return
    try:
        with transaction.atomic():
            Heartbeat.objects.create(name=name, at=now)
    except IntegrityError:
        # Another process created the row between our update and insert.
        with transaction.atomic():
            Heartbeat.objects.filter(name=name).update(at=now)


def last_beat(name: str) -> datetime | None:
    """When `name` last did its work, or None if it never did."""
    return Heartbeat.objects.filter(name=name).values_list("at", flat=True).first()
