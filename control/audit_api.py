"""The audit trail over the management API (docs/design.md §8): newest first,
filtered by action prefix, actor, target, project and time. A key bound to
a project reads the events of its project's rows only (control.reach)."""

from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from audit.models import AuditEvent
from control import auth, paging, reach, scopes
from control.fields import Instant
from control.schemas import ERRORS, PageQuery
from core.text import Text

router = Router(tags=["audit"])


class AuditEventOut(Schema):
    id: int
    at: datetime
    actor_kind: str
    actor_name: str
    action: str
    target_type: str
    target_id: str
    target_repr: str
    project: str = Field(description="The project of the row it is about; empty: none.")
    data: dict[str, Any]


class AuditPage(Schema):
    items: list[AuditEventOut]
    next_cursor: str | None


class AuditFilters(PageQuery):
    action: Text(1, 64) | None = Field(None, description="Actions starting with this, e.g. job.")
    actor: Text(1, 200) | None = Field(None, description="The actor's name, exactly.")
    target: Text(1, 300) | None = Field(None, description="The target's name or id, exactly.")
    since: Instant | None = Field(None, description="At or after this instant (ISO 8601).")
    project: Text(0, 100) | None = Field(None, description="The events of this project's rows.")


def events(filters: AuditFilters) -> QuerySet:
    found = AuditEvent.objects.all()
    if filters.action:
        found = found.filter(action__startswith=filters.action)
    if filters.actor:
        found = found.filter(actor_name=filters.actor)
    if filters.target:
        found = found.filter(Q(target_repr=filters.target) | Q(target_id=filters.target))
    if filters.since:
        found = found.filter(at__gte=filters.since)
    return found


@router.get("audit", auth=auth.needs(scopes.AUDIT_READ), response={200: AuditPage, **ERRORS})
def list_events(request: HttpRequest, filters: Query[AuditFilters]) -> dict[str, Any]:
    """Audit events, newest first (by id: the order they were written)."""
    rows, cursor = paging.page(
        reach.of_project(request.auth, events(filters), filters.project),
        "id",
        filters.limit,
        filters.cursor,
        descending=True,
    )
    return {"items": rows, "next_cursor": cursor}
