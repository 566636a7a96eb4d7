"""What every detector shares (`notifications.detectors`, `stall_watch`): the
thresholds in force for an event, which rule an emitted event is meant for,
how often a grace-based check looks, and emitting each event once by its
key, EMIT_LIMIT at a time.

The keys known recorded are remembered per process while a step keeps
finding them, so a lasting condition costs no insert and no lookup.
"""

import hashlib
import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from notifications.models import Event, Rule
from scheduler.models import Execution
from scheduler.runs import events

# Executions examined per query, and events emitted per run of a step: its
# work per run stays bounded (what is left is found again at the next run).
BATCH = 500
EMIT_LIMIT = 50
KEY_LENGTH = 200  # Event.key's max_length

# Per process: {event name: keys known recorded, among those the step last
# found}.
_recorded = {}


def forget() -> None:
    """Drop the keys this process remembers (tests: rolled-back ids come back)."""
    _recorded.clear()


# How often the grace-based checks (job.missed, labels.unserved) look: a
# tenth of the shortest grace in force, within these bounds. With the
# default 300 s grace, every 30 s: at rest the missed-job check was half of
# an idle loop's CPU when it ran every 5 s (bench/idle_cost.py).
GRACE_CHECK_MIN = 5.0
GRACE_CHECK_MAX = 30.0


def grace_check_every(graces: list[float]) -> float:
    return min(GRACE_CHECK_MAX, max(GRACE_CHECK_MIN, min(graces) / 10))


def next_check(event: str, setting: str) -> Callable[[datetime], datetime]:
    """The `Step.until` of the detector of `event`, whose default grace is
    the setting named `setting`: what it finds is reported at most a tenth
    of its grace late."""

    def until(now):
        graces = thresholds(event, "grace", getattr(settings, setting))
        return now + timedelta(seconds=grace_check_every(graces))

    return until


def thresholds(event: str, field: str, default: float) -> list[float]:
    """The setting's value and each distinct `field` of the enabled rules
    routing `event`, smallest first."""
    values = {float(default)}
    rules = Rule.objects.filter(enabled=True, **{f"{field}__isnull": False})
    for routed, value in rules.values_list("events", field):
        if event in (routed or ()) and value > 0:
            values.add(float(value))
    return sorted(values)


def threshold_matches(rule: Rule, name: str, data: dict[str, Any]) -> bool:
    """Whether an event a detector emitted is meant for `rule`: each carries
    the threshold it crossed, and a rule hears the events of its own
    threshold (the setting's when it has none). Other events: always."""
    if name == "job.slow":
        if data.get("factor") is None:
            return True  # past the job's own max_duration
        wanted = rule.slow_factor or settings.CRONIQ_SLOW_FACTOR
        return math.isclose(data["factor"], wanted)
    defaults = {
        "job.missed": settings.CRONIQ_MISSED_GRACE,
        "labels.unserved": settings.CRONIQ_UNSERVED_GRACE,
        "scheduler.stalled": settings.CRONIQ_STALL_GRACE,
    }
    if name not in defaults or data.get("grace") is None:
        return True
    return math.isclose(data["grace"], rule.grace or defaults[name])


def emit_new(
    name: str, found: dict[str, tuple[int | None, dict[str, Any]]], now: datetime
) -> tuple[int, bool]:
    """Emit `found` ({key: (execution id or None, data)}) but the keys
    already recorded, EMIT_LIMIT at most, in one transaction; returns (how
    many were emitted, whether that was all of them). The keys known
    recorded are remembered while the step keeps finding them, so a lasting
    condition costs no query."""
    known = _recorded.get(name, set()) & found.keys()
    unknown = [key for key in found if key not in known]
    for start in range(0, len(unknown), BATCH):
        chunk = unknown[start : start + BATCH]
        known.update(Event.objects.filter(key__in=chunk).values_list("key", flat=True))
    new = [key for key in unknown if key not in known]
    complete = len(new) <= EMIT_LIMIT
    new = new[:EMIT_LIMIT]
    _recorded[name] = known
    if not new:
        return 0, complete
    executions = Execution.objects.select_related("job", "runner").in_bulk(
        [found[key][0] for key in new if found[key][0] is not None]
    )
    with transaction.atomic():
        for key in new:
            pk, data = found[key]
            data = data() if callable(data) else data
            execution = executions.get(pk)
            events.emit(
                name,
                at=now,
                job=execution.job if execution else None,
                execution=execution,
                runner=execution.runner if execution else None,
                data=data,
                key=key,
            )
    known.update(new)
    return len(new), complete


def number(value: float) -> str:
    """3.0 -> "3", 2.5 -> "2.5": thresholds as keys write them."""
    return f"{value:g}"


def iso(instant: datetime | None) -> str | None:
    return instant.isoformat() if instant is not None else None


def fitted(key: str) -> str:
    """A key within Event.key's length: long label sets are hashed."""
    if len(key) <= KEY_LENGTH:
        return key
    return key[: KEY_LENGTH - 41] + "~" + hashlib.sha1(key.encode()).hexdigest()
