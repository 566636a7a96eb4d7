"""The sink of `scheduler.runs.events`: one Event row per event, in the caller's
transaction (the first half of the outbox; `notifications.routing` does the
rest)."""

import json
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction

from core import db
from notifications import wakeup
from notifications.models import Event


def record_event(
    name: str,
    *,
    at: datetime,
    job: Any = None,
    execution: Any = None,
    runner: Any = None,
    data: dict[str, Any] | None = None,
    key: str | None = None,
) -> Event | None:
    """Write the event with snapshots of its subjects (docs/design.md §9 body
    shapes), so the message still reads right after a job is renamed or
    deleted. Returns the Event, or None when `key` was recorded before."""
    facts = dict(data or {})
    if job is not None:
        facts["job"] = job_facts(job)
    if execution is not None:
        facts["execution"] = execution_facts(execution)
    if runner is not None:
        facts["runner"] = {"name": runner.name}
    event = Event(
        name=name,
        at=at,
        job=job,
        execution=execution,
        runner=runner,
        data=facts,
        key=key,
    )
    if key is None:
        event.save()
    else:
        try:
            with transaction.atomic():
                event.save()
        except IntegrityError:
            return None
    wakeup.poke_after_commit()
    return event


def job_facts(job: Any) -> dict[str, Any]:
    return {"name": job.name, "owner": job.owner, "labels": list(job.labels)}


def execution_facts(execution: Any) -> dict[str, Any]:
    duration = execution.duration
    return {
        "id": execution.pk,
        "scheduled_for": execution.scheduled_for.isoformat(),
        "attempt": execution.attempt,
        "state": execution.state,
        "exit_code": execution.exit_code,
        "duration": duration.total_seconds() if duration is not None else None,
    }


def record_events(name: str, *, at: datetime, datas: list[dict[str, Any]]) -> int:
    """Write many events of no job, execution or runner at once (a loop
    step moving thousands of rows: one save each took a third of a
    millisecond apiece); returns how many. One INSERT ... SELECT over a JSON
    array of the bodies, one round trip: bulk_create spent 0.12 ms an event
    building and preparing model instances, and executemany still sent a
    statement an event (10,000 checks going down on PostgreSQL: 7,500 a
    second)."""
    if not datas:
        return 0
    when = EVENT_AT.get_db_prep_save(at, connection)
    bodies = json.dumps(datas, cls=EVENT_DATA.encoder)
    with connection.cursor() as cursor:
        cursor.execute(INSERT_EVENTS[db.vendor()], [name, when, bodies])
    wakeup.poke_after_commit()
    return len(datas)


EVENT_AT = Event._meta.get_field("at")
EVENT_DATA = Event._meta.get_field("data")
# Each element of the JSON array parameter becomes one event's data.
INSERT_EVENTS = {
    "postgresql": f"INSERT INTO {Event._meta.db_table} (name, at, data) "
    "SELECT %s, %s, value FROM jsonb_array_elements(%s::jsonb)",
    "sqlite": f"INSERT INTO {Event._meta.db_table} (name, at, data) "
    "SELECT %s, %s, value FROM json_each(%s)",
}
