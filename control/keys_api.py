"""API keys over the API (an extension of docs/design.md §8): any key may mint a
key within its own reach; listing and revoking need `admin`. A key bound to
a project mints keys bound to it only, and lists and revokes only the keys
of its project; the others are 404 to it (control.reach)."""

from datetime import datetime
from typing import Annotated, Any, Literal

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Query, Router, Schema, Status
from ninja.errors import HttpError

from control import auth, keys, paging, reach, scopes
from control.fields import Instant
from control.models import ApiKey
from control.schemas import ERRORS, PageQuery
from core.text import Text

router = Router(tags=["keys"])

Scope = Literal[scopes.ALL]


class KeyIn(Schema):
    # No "/" (DELETE /keys/{name} could not address it) and no blanks around it.
    name: Annotated[
        Text(1, 100),
        Field(pattern=r"^[^/\s](?:[^/]*[^/\s])?$", description="Who or what uses the key."),
    ]
    scopes: Annotated[list[Scope], Field(min_length=1, max_length=len(scopes.ALL))]
    expires_at: Annotated[
        Instant | None,
        Field(description="When the key stops working; never if absent (only a key that"
              " never expires may mint such a key)."),
    ] = None  # fmt: skip
    project: Annotated[
        Text(1, 100) | None,
        Field(description="Bind the key to this project; without it, the calling key's"
              " own (none: a global key, if the calling key is global)."),
    ] = None  # fmt: skip

    model_config = {
        "json_schema_extra": {
            "examples": [
                {"name": "ci-deploy", "scopes": ["jobs:read", "jobs:trigger"],
                 "expires_at": "2027-06-30T00:00:00Z"}
            ]
        }
    }  # fmt: skip


class NewKeyOut(Schema):
    name: str
    project: str | None = Field(description="The project it is bound to; null: global.")
    scopes: list[str]
    expires_at: datetime | None
    key: str = Field(description="The key itself: shown only in this answer.")


class KeyOut(Schema):
    name: str
    project: str | None = Field(description="The project it is bound to; null: global.")
    scopes: list[str]
    created_at: datetime
    created_by: str
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None


def shown(key: ApiKey) -> dict[str, Any]:
    """The key as the API answers it: its project null when it is global."""
    return {
        "name": key.name,
        "project": key.project or None,
        "scopes": key.scopes,
        "created_at": key.created_at,
        "created_by": key.created_by,
        "expires_at": key.expires_at,
        "last_used_at": key.last_used_at,
        "revoked_at": key.revoked_at,
    }


class KeyPage(Schema):
    items: list[KeyOut]
    next_cursor: str | None


@router.post("keys", auth=auth.any_key(), response={201: NewKeyOut, **ERRORS})
def create_key(request: HttpRequest, body: KeyIn) -> Status:
    """Create a key with at most the calling key's scopes, expiry and project."""
    now, caller = timezone.now(), request.auth
    project = None if body.project is None else reach.chosen(caller, body.project)
    try:
        key, secret = keys.mint(
            caller, body.name, body.scopes, body.expires_at, now, auth.actor(caller), project
        )
    except keys.KeyRefused as refused:
        raise HttpError(refused.status, refused.detail) from None
    return Status(201, {**shown(key), "key": secret})


@router.get("keys", auth=auth.needs(scopes.ADMIN), response={200: KeyPage, **ERRORS})
def list_keys(request: HttpRequest, page: Query[PageQuery]) -> dict[str, Any]:
    """Every key (of the calling key's project, if it is bound to one),
    revoked and expired ones too, by name; never a secret."""
    rows = reach.narrowed(request.auth, ApiKey.objects.all())
    found, cursor = paging.page(rows, "name", page.limit, page.cursor)
    return {"items": [shown(key) for key in found], "next_cursor": cursor}


@router.delete("keys/{name}", auth=auth.needs(scopes.ADMIN), response={204: None, **ERRORS})
def revoke_key(request: HttpRequest, name: Text(1, 100)) -> Status:
    """Revoke a key: its calls answer 401 from now on. Revoking twice is fine."""
    key = reach.narrowed(request.auth, ApiKey.objects.filter(name=name)).first()
    if key is None:
        raise HttpError(404, f"no API key named {name!r}")
    keys.revoke(key, timezone.now(), actor=auth.actor(request.auth))
    return Status(204, None)
