"""`/api/v1/checks`: list, create, read, change and delete check-ins,
addressed by name (docs/design.md §12). The fields and their checks are
`checks.items`; each write is audited with the key as actor, and an
apply-managed check is changed only by a call that adopts it
(control.ownership), as a job is.

Beside the fields a check answers its `ping_url` (the secret its pings
carry, so only keys with `checks:read` see it), `state`, `last_ping_at`
and `next_expected_at`. PATCH also takes `"paused": true | false`.

A check is in one project: a key bound to a project reaches only its
checks, and a `project` in a write creates or moves it there (control.reach).
"""

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone
from ninja import Body, Query, Router, Schema, Status
from ninja.errors import HttpError

import audit
from checks import items
from checks.models import Check
from control import auth, examples, ownership, paging, reach, scopes
from control.models import ApiKey
from core.ownership import ManagedBy
from core.text import Text
from scheduler.apply.items import ApplyError

router = Router(tags=["checks"])


class CheckOut(Schema):
    name: str
    project: str
    description: str
    labels: list[str]
    schedule: str | None
    timezone: str
    period: int | None
    grace: int
    ping_url: str
    state: str
    last_ping_at: datetime | None
    next_expected_at: datetime | None
    managed_by: str
    managed_source: str = ""


class CheckPage(Schema):
    items: list[CheckOut]
    next_cursor: str | None


class CheckFilters(Schema):
    project: Text(0, 100) | None = None
    state: Text(0, 10) | None = None
    name: Text(0, 200) | None = None
    limit: int = paging.DEFAULT_LIMIT
    cursor: Text(0, 1000) | None = None


def get(name: str, key: ApiKey, *, lock: bool = False) -> Check:
    """The check named `name` that `key` reaches (control.reach), or 404 (a
    NUL names none: PostgreSQL refuses it)."""
    rows = reach.narrowed(key, Check.objects.select_for_update() if lock else Check.objects.all())
    found = None if "\x00" in name else rows.filter(name=name).first()
    if found is None:
        raise HttpError(404, f"no check named {name!r}")
    return found


def checked(item: dict[str, Any], project: str, now: datetime) -> dict[str, Any]:
    """The Check field values of `item`, in `project` (control.reach.chosen)."""
    try:
        found = items.values({k: v for k, v in item.items() if k != "project"}, now)
    except ApplyError as e:
        raise HttpError(422, "; ".join(e.errors)) from None
    return {**found, "project": project}


@router.get("checks", response=CheckPage, auth=auth.needs(scopes.CHECKS_READ))
def list_checks(request: HttpRequest, filters: Query[CheckFilters]) -> dict[str, Any]:
    rows = reach.of_project(request.auth, Check.objects.all(), filters.project)
    if filters.state:
        rows = rows.filter(state=filters.state)
    if filters.name:
        rows = rows.filter(name__startswith=filters.name)
    found, cursor = paging.page(rows, "name", limit=filters.limit, cursor=filters.cursor)
    return {"items": [items.fields(check) for check in found], "next_cursor": cursor}


@router.post(
    "checks",
    response={201: CheckOut},
    auth=auth.needs(scopes.CHECKS_WRITE),
    openapi_extra=examples.body(examples.CHECK),
)
def create_check(request: HttpRequest, item: Body[dict[str, Any]]) -> Status:
    now = timezone.now()
    found = checked(item, reach.chosen(request.auth, item.get("project")), now)
    taken = HttpError(409, f"a check named {found['name']!r} already exists")
    if Check.objects.filter(name=found["name"]).exists():
        raise taken
    try:
        with transaction.atomic():
            check = items.create(found, managed_by=ManagedBy.API)
            audit.record(
                "check.created",
                target=check,
                actor=auth.actor(request.auth),
                at=now,
                data={"name": check.name, "fields": items.stored(check), "via": "api"},
            )
    except IntegrityError:
        raise taken from None  # created by someone else meanwhile
    return Status(201, items.fields(check))


@router.get("checks/{name}", response=CheckOut, auth=auth.needs(scopes.CHECKS_READ))
def get_check(request: HttpRequest, name: str) -> dict[str, Any]:
    return items.fields(get(name, request.auth))


@router.patch(
    "checks/{name}",
    response=CheckOut,
    auth=auth.needs(scopes.CHECKS_WRITE),
    openapi_extra=examples.body(examples.CHECK_PATCH),
)
def change_check(request: HttpRequest, name: str, patch: Body[dict[str, Any]]) -> dict[str, Any]:
    patch = dict(patch)
    adopt = ownership.adopt_flag(patch.pop("adopt", False))
    paused = patch.pop("paused", None)
    if paused is not None and not isinstance(paused, bool):
        raise HttpError(422, "paused: expected true or false")
    if patch.get("name", name) != name:
        raise HttpError(422, "name: a check is addressed by its name and cannot be renamed")
    now, actor = timezone.now(), auth.actor(request.auth)
    with transaction.atomic():
        check = get(name, request.auth, lock=True)
        wanted = patch.get("project")
        project = check.project if wanted is None else reach.chosen(request.auth, wanted)
        adopted = ownership.check(check, adopt)
        before = items.stored(check)
        found = checked({**before, **patch}, project, now)
        if adopted:
            ownership.record_adopted(check, now=now, actor=actor)
            check.managed_by, check.managed_source = ManagedBy.API, ""
        changed = items.write(check, found, paused=paused)
        if changed or adopted:
            check.save()
        if changed:
            after = items.stored(check)
            diff = {key: [before[key], after[key]] for key in changed if key in after}
            if "paused" in changed:
                diff["paused"] = [not paused, paused]
            audit.record(
                "check.changed",
                target=check,
                actor=actor,
                at=now,
                data={"name": name, "diff": diff, "via": "api"},
            )
    return items.fields(check)


@router.delete("checks/{name}", response={204: None}, auth=auth.needs(scopes.CHECKS_WRITE))
def delete_check(request: HttpRequest, name: str, adopt: bool = False) -> Status:
    now, actor = timezone.now(), auth.actor(request.auth)
    with transaction.atomic():
        check = get(name, request.auth, lock=True)
        if ownership.check(check, adopt):
            ownership.record_adopted(check, now=now, actor=actor)
        data = {"name": name, "fields": items.stored(check), "via": "api"}
        audit.record("check.deleted", target=check, actor=actor, at=now, data=data)
        check.delete()
    return Status(204, None)
