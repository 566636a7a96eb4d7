"""`/api/v1/secrets`: set, list and delete secrets (docs/design.md §11).

Write-only: no call answers a value. Every call needs `secrets:write`,
listing too: a secret's name says what a team holds, and the only keys that
need the list are those that keep it.
"""

from datetime import datetime
from typing import Annotated, Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Query, Router, Schema, Status
from ninja.errors import HttpError

from control import auth, paging, scopes
from control.schemas import ERRORS, PageQuery
from core.text import Text
from vault import store
from vault.models import DEFAULT_PROJECT, NAME_PATTERN, Secret

router = Router(tags=["secrets"])


class SecretIn(Schema):
    name: Annotated[Text(1, 100), Field(pattern=f"^{NAME_PATTERN}$")]
    value: Annotated[
        Text(1, store.LONGEST_VALUE),
        Field(description="The secret itself: stored encrypted, never answered."),
    ]
    project: Text(1, 100) = DEFAULT_PROJECT

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


def known_project(project: str) -> str:
    if project != DEFAULT_PROJECT:
        raise HttpError(
            422,
            f"project: no project named {project!r} (this install has only {DEFAULT_PROJECT!r})",
        )
    return project


@router.post(
    "secrets",
    auth=auth.needs(scopes.SECRETS_WRITE),
    response={200: SecretOut, 201: SecretOut, **ERRORS},
)
def set_secret(request: HttpRequest, body: SecretIn) -> Status:
    """Create a secret (201) or replace its value (200)."""
    project = known_project(body.project)
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
def list_secrets(request: HttpRequest, page: Query[PageQuery]) -> dict[str, Any]:
    """The secrets' names and dates, by name; never a value."""
    rows, cursor = paging.page(
        Secret.objects.filter(project=DEFAULT_PROJECT), "name", page.limit, page.cursor
    )
    return {"items": rows, "next_cursor": cursor}


@router.delete(
    "secrets/{name}", auth=auth.needs(scopes.SECRETS_WRITE), response={204: None, **ERRORS}
)
def delete_secret(request: HttpRequest, name: Text(1, 100)) -> Status:
    """Delete a secret: runs of jobs that still name it fail at claim, saying so."""
    secret = Secret.objects.filter(project=DEFAULT_PROJECT, name=name).first()
    if secret is None:
        raise HttpError(404, f"no secret named {name!r}")
    store.delete(secret, actor=auth.actor(request.auth), now=timezone.now())
    return Status(204, None)
