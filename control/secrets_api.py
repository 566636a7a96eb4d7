"""`/api/v1/secrets`: set, list and delete secrets (docs/design.md §11).

Write-only: no call answers a value. Every call needs `secrets:write`,
listing too: a secret's name says what a team holds, and the only keys that
need the list are those that keep it.

A secret's name is its project's: each call is about one project, the
`project` given, else the key's own (a key bound to a project reaches only
its own: control.reach), else `default`.
"""

from datetime import datetime
from typing import Annotated, Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Query, Router, Schema, Status
from ninja.errors import HttpError

from control import auth, paging, reach, scopes
from control.schemas import ERRORS, PageQuery
from core.text import Text
from vault import store
from vault.models import NAME_PATTERN, Secret

router = Router(tags=["secrets"])


class SecretIn(Schema):
    name: Annotated[Text(1, 100), Field(pattern=f"^{NAME_PATTERN}$")]
    value: Annotated[
        Text(1, store.LONGEST_VALUE),
        Field(description="The secret itself: stored encrypted, never answered."),
    ]
    project: Text(1, 100) | None = Field(
        None, description="Its project; without one, the key's own, else default."
    )

    model_config = {
        "json_schema_extra": {"examples": [{"name": "db-password", "value": "s3cr3t-v4lue"}]}
    }


class SecretOut(Schema):
    name: str
    project: str
    created_at: datetime
    updated_at: datetime


class SecretPage(Schema):
    items: list[SecretOut]
    next_cursor: str | None


class SecretQuery(PageQuery):
    project: Text(1, 100) | None = Field(
        None, description="The project whose secrets; without one, the key's own, else default."
    )


@router.post(
    "secrets",
    auth=auth.needs(scopes.SECRETS_WRITE),
    response={200: SecretOut, 201: SecretOut, **ERRORS},
)
def set_secret(request: HttpRequest, body: SecretIn) -> Status:
    """Create a secret (201) or replace its value (200)."""
    project = reach.chosen(request.auth, body.project)
    try:
        secret, created = store.put(
            body.name,
            body.value,
            project=project,
            actor=auth.actor(request.auth),
            now=timezone.now(),
        )
    except ValidationError as e:
        field, messages = next(iter(e.message_dict.items()))
        raise HttpError(422, f"{field}: {messages[0]}") from None
    return Status(201 if created else 200, secret)


@router.get("secrets", auth=auth.needs(scopes.SECRETS_WRITE), response={200: SecretPage, **ERRORS})
def list_secrets(request: HttpRequest, page: Query[SecretQuery]) -> dict[str, Any]:
    """One project's secrets' names and dates, by name; never a value."""
    project = reach.chosen(request.auth, page.project)
    rows = reach.narrowed(request.auth, Secret.objects.filter(project=project))
    found, cursor = paging.page(rows, "name", page.limit, page.cursor)
    return {"items": found, "next_cursor": cursor}


@router.delete(
    "secrets/{name}", auth=auth.needs(scopes.SECRETS_WRITE), response={204: None, **ERRORS}
)
def delete_secret(
    request: HttpRequest, name: Text(1, 100), project: Text(1, 100) | None = None
) -> Status:
    """Delete a secret of a project (`?project=`, else the key's own, else
    default): runs of jobs that still name it fail at claim, saying so."""
    project = reach.chosen(request.auth, project)
    secret = reach.narrowed(request.auth, Secret.objects.filter(project=project, name=name)).first()
    if secret is None:
        raise HttpError(404, f"no secret named {name!r}")
    store.delete(secret, actor=auth.actor(request.auth), now=timezone.now())
    return Status(204, None)
