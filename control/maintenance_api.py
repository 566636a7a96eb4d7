"""`/api/v1/maintenance`: read and set maintenance mode (docs/design.md §10),
the global switch and the windows not yet ended. The rules are in
scheduler.runs.maintenance; every change is audited with the key as actor.
Maintenance is the whole install's: a key bound to a project reads it, only
a global key sets it (control.reach.needs_global)."""

from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Schema
from ninja.errors import HttpError
from pydantic import ConfigDict, Field

from control import auth, examples, reach, scopes
from control.fields import Instant
from core.text import Text
from scheduler.models import MaintenanceWindow
from scheduler.runs import maintenance

router = Router(tags=["maintenance"])


class WindowIn(Schema):
    start: Instant
    end: Instant
    labels: list[Text(1, 200)] = Field(default_factory=list, max_length=100)
    reason: Text(0, 200) = ""


class MaintenanceIn(Schema):
    model_config = ConfigDict(json_schema_extra=examples.schema(examples.MAINTENANCE))

    on: bool | None = Field(None, description="The global switch; omitted: left as it is.")
    reason: Text(0, 200) = ""
    windows: list[WindowIn] | None = Field(
        None, max_length=1000, description="The windows not yet ended; omitted: left as they are."
    )


class WindowOut(Schema):
    id: int
    start: datetime
    end: datetime
    labels: list[str]
    reason: str
    active: bool


class MaintenanceOut(Schema):
    active: bool
    on: bool
    reason: str
    changed_at: datetime | None
    windows: list[WindowOut]


def current(now: datetime) -> dict[str, Any]:
    switch = maintenance.switch_read()
    windows = MaintenanceWindow.objects.filter(end__gt=now)
    return {
        "active": maintenance.load(now).active(now),
        "on": switch.on,
        "reason": switch.reason,
        "changed_at": switch.changed_at,
        "windows": [
            {
                "id": w.pk,
                "start": w.start,
                "end": w.end,
                "labels": w.labels,
                "reason": w.reason,
                "active": w.start <= now < w.end,
            }
            for w in windows
        ],
    }


def in_utc(window: WindowIn) -> dict[str, Any]:
    """A window's fields, its ends in UTC: PostgreSQL refuses offsets past
    15:59 that Python (and ISO 8601 text) allow."""
    return {
        **window.dict(),
        "start": window.start.astimezone(UTC),
        "end": window.end.astimezone(UTC),
    }


@router.get("maintenance", response=MaintenanceOut, auth=auth.needs(scopes.RUNNERS_READ))
def get_maintenance(request: HttpRequest) -> dict[str, Any]:
    return current(timezone.now())


@router.put("maintenance", response=MaintenanceOut, auth=auth.needs(scopes.ADMIN))
def put_maintenance(request: HttpRequest, body: MaintenanceIn) -> dict[str, Any]:
    reach.needs_global(request.auth, "setting maintenance")
    now, actor = timezone.now(), auth.actor(request.auth)
    with transaction.atomic():
        if body.windows is not None:
            try:
                maintenance.replace_windows([in_utc(w) for w in body.windows], now, actor)
            except ValueError as e:
                raise HttpError(422, str(e)) from None
        if body.on is not None:
            maintenance.set_switch(body.on, now, actor, reason=body.reason)
    return current(now)
