"""Events worth telling an operator about, emitted where they happen.

The scheduler and the runners know when an execution fails, a failure streak
ends or a runner goes dark, but not who wants to hear it. An app above them
that does (`NotificationsConfig.ready`) registers a sink; `emit(...)` hands
each event to every sink *inside the caller's transaction*, so the record of
the event commits or rolls back with the state change that caused it
(docs/design.md §9: an outbox that loses nothing and invents nothing). With no
sink registered, emitting does nothing.

Event names are docs/design.md §9's.
"""

from collections.abc import Callable
from datetime import datetime
from typing import Any

from scheduler.models import Execution, Job

NAMES = (
    "execution.failed",
    "execution.given_up",
    "execution.timed_out",
    "execution.lost",
    "execution.requirements_unmet",
    "job.failing",
    "job.recovered",
    "job.missed",
    "job.slow",
    "job.fast",
    "job.paused",
    "runner.offline",
    "runner.flapping",
    "labels.unserved",
    "scheduler.stalled",
    "incident.grouped",
    "check.down",
    "check.up",
)

_sinks = []


def on_event(sink: Callable[..., object]) -> None:
    """Call `sink(name, at=, job=, execution=, runner=, data=, key=)` for
    every event. Registering the same sink twice registers it once."""
    if sink not in _sinks:
        _sinks.append(sink)


def emit(
    name: str,
    *,
    at: datetime,
    job: Job | None = None,
    execution: Execution | None = None,
    runner: Any = None,
    data: dict[str, Any] | None = None,
    key: str | None = None,
) -> None:
    """Hand one event to the sinks. `key`, when given, makes the event
    once-only: a second event with the same key is dropped by the sink."""
    if name not in NAMES:
        raise ValueError(f"unknown event {name!r}")
    for sink in list(_sinks):
        sink(name, at=at, job=job, execution=execution, runner=runner, data=data or {}, key=key)
