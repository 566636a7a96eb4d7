"""`check.down` and `check.up` into the notifications outbox (docs/design.md
§9, §12): an Event row in the transaction of the state change, routed by the
notifier through the rules (`checks: "glob"` selects them) like a job's."""

from datetime import datetime

from checks.models import Check
from notifications.recording import record_event, record_events


def facts(check: Check) -> dict[str, str | None]:
    """The payload's `"check"`: {"name", "project", "state", "last_ping_at"}."""
    return {
        "name": check.name,
        "project": check.project,
        "state": check.state,
        "last_ping_at": check.last_ping_at.isoformat() if check.last_ping_at else None,
    }


def payload(check: Check, reason: str) -> dict[str, object]:
    return {"check": facts(check), "labels": list(check.labels), "reason": reason}


def emit(name: str, check: Check, at: datetime, reason: str) -> None:
    """Record event `name` about `check` (its state already the new one)."""
    record_event(name, at=at, data=payload(check, reason))


def emit_many(name: str, checks: list[Check], at: datetime, reason: str) -> int:
    """`emit` for many checks at once, in bulk (the loop's step)."""
    return record_events(name, at=at, datas=[payload(check, reason) for check in checks])
