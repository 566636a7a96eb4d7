"""Audit trail and persisted counters.

`record(...)` is the one entry point every app uses to write an AuditEvent;
`increment(...)` moves a counter that `/metrics` exports; `observe(...)` adds
to a persisted histogram; `mark_tick(now)` is the scheduler loop's heartbeat;
`prune(now)` applies the audit retention.
"""


def record(action, *, target=None, actor=None, data=None, at=None, counter=None):
    from audit.recording import record as _record

    return _record(action, target=target, actor=actor, data=data, at=at, counter=counter)


def increment(name, amount=1, **labels):
    from audit.recording import increment as _increment

    return _increment(name, amount, **labels)


def observe(name, *seconds):
    """Add observations to a persisted histogram (see audit.recording)."""
    from audit.recording import observe as _observe

    return _observe(name, *seconds)


def mark_tick(now):
    """The scheduler loop finished a tick at `now`: exported as
    croniq_scheduler_last_tick_timestamp_seconds."""
    from audit.recording import SCHEDULER_TICK, beat

    return beat(SCHEDULER_TICK, now)


def last_tick():
    """When the scheduler loop last finished a tick (None if never)."""
    from audit.recording import SCHEDULER_TICK, last_beat

    return last_beat(SCHEDULER_TICK)


def prune(now, **limits):
    """Delete audit events older than CRONIQ_AUDIT_RETENTION_DAYS, in bounded
    batches; returns how many went (see audit.retention.prune)."""
    from audit.retention import prune as _prune

    return _prune(now, **limits)
