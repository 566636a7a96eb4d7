"""Audit trail and persisted counters.

`record(...)` is the one entry point every app uses to write an AuditEvent;
`increment(...)` moves a counter that `/metrics` exports.
"""


def record(action, *, target=None, actor=None, data=None, at=None, counter=None):
    from audit.recording import record as _record

    return _record(action, target=target, actor=actor, data=data, at=at, counter=counter)


def increment(name, amount=1, **labels):
    from audit.recording import increment as _increment

    return _increment(name, amount, **labels)


def observe(name, seconds):
    """Add one observation to a persisted histogram (see audit.recording)."""
    from audit.recording import observe as _observe

    return _observe(name, seconds)
