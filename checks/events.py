"""`check.down` and `check.up` into the notifications outbox (docs/design.md
§9, §12): an Event row in the transaction of the state change, routed by the
notifier through the rules (`checks: "glob"` selects them) like a job's."""

from datetime import datetime

from checks.models import Check
from notifications.recording import record_event, record_events


def facts(check: Check) -> dict[str, str | None]:
    """The payload's `"check"`: {"name", "project", "state", "last_ping_at"}."""
    return facts_of(check.name, check.project, check.state, check.last_ping_at)


def facts_of(
    name: str, project: str, state: str, last_ping_at: datetime | None
) -> dict[str, str | None]:
    return {
        "name": name,
        "project": project,
        "state": state,
        "last_ping_at": last_ping_at.isoformat() if last_ping_at else None,
    }


def payload(check: Check, reason: str) -> dict[str, object]:
    return payload_of(facts(check), check.labels, reason)


def payload_of(facts: dict[str, str | None], labels: list[str], reason: str) -> dict[str, object]:
    """The event's data: {"check", "labels", "reason"}, for a Check row or
    the columns the loop's bulk update returned (checks.evaluation)."""
    return {"check": facts, "labels": list(labels), "reason": reason}


def emit(name: str, check: Check, at: datetime, reason: str) -> None:
    """Record event `name` about `check` (its state already the new one)."""
    record_event(name, at=at, data=payload(check, reason))


def emit_many(name: str, datas: list[dict[str, object]], at: datetime) -> int:
    """Record event `name` once for each payload in `datas`, in bulk (the
    loop's step)."""
    return record_events(name, at=at, datas=datas)
