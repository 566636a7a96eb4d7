"""Audit trail and persisted counters.

`record(...)` is the one entry point every app uses to write an AuditEvent;
`increment(...)` moves a counter that `/metrics` exports; `observe(...)` adds
to a persisted histogram; `mark_tick(now)` is the scheduler loop's heartbeat;
`prune(now)` applies the audit retention.
"""

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the package is imported before the apps are ready
    from django.db import models

    from audit.models import AuditEvent


def record(
    action: str,
    *,
    target: "models.Model | None" = None,
    actor: object = None,
    data: dict[str, Any] | None = None,
    at: datetime | None = None,
    counter: tuple[str, dict[str, Any]] | None = None,
) -> "AuditEvent":
    from audit.recording import record as _record

    return _record(action, target=target, actor=actor, data=data, at=at, counter=counter)


def increment(name: str, amount: int = 1, **labels: Any) -> None:
    from audit.recording import increment as _increment

    return _increment(name, amount, **labels)


def observe(name: str, *seconds: float) -> None:
    """Add observations to a persisted histogram (see audit.recording)."""
    from audit.recording import observe as _observe

    return _observe(name, *seconds)


def mark_tick(now: datetime) -> None:
    """The scheduler loop finished a tick at `now`: exported as
    croniq_scheduler_last_tick_timestamp_seconds."""
    from audit.recording import SCHEDULER_TICK, beat

    return beat(SCHEDULER_TICK, now)


def last_tick() -> datetime | None:
    """When the scheduler loop last finished a tick (None if never)."""
    from audit.recording import SCHEDULER_TICK, last_beat

    return last_beat(SCHEDULER_TICK)


def prune(now: datetime, **limits: Any) -> int:
    """Delete audit events older than CRONIQ_AUDIT_RETENTION_DAYS, in bounded
    batches; returns how many went (see audit.retention.prune)."""
    from audit.retention import prune as _prune

    return _prune(now, **limits)
