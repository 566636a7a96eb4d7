"""`POST /api/v1/apply`: an apply document as JSON, planned and applied by
the code behind `manage.py apply` (scheduler.applyfile), all or nothing and
audited; it needs both jobs:write and calendars:write (DESIGN.md §8)."""

from typing import Any

from django.utils import timezone
from ninja import Body, Router, Schema
from ninja.errors import HttpError

from control import auth, scopes
from scheduler.applyfile import ApplyError, apply, check_document, plan

router = Router(tags=["apply"])


class ChangeOut(Schema):
    action: str
    kind: str
    name: str
    diff: dict[str, Any]


class ApplyOut(Schema):
    changes: list[ChangeOut]
    applied: bool


@router.post(
    "apply",
    response=ApplyOut,
    auth=auth.needs_all(scopes.JOBS_WRITE, scopes.CALENDARS_WRITE),
)
def apply_document(request, document: Body[Any], dry_run: bool = False, prune: bool = False):
    key = request.auth
    try:
        changes = apply(
            check_document(document),
            now=timezone.now(),
            prune=prune,
            dry_run=dry_run,
            actor=auth.actor(key),
            source=f"api:{key.name}",
        )
    except ApplyError as e:
        raise HttpError(422, "; ".join(e.errors)) from None
    return {"changes": plan(changes), "applied": not dry_run}
