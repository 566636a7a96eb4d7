"""`/api/v1/dead-letters` (docs/design.md §8, §10): executions that exhausted
their retries, their replay (409 `stale replay` past CRONIQ_REPLAY_MAX_AGE
without force) and their discard, one or in bulk. The rules are in
scheduler.triage.dead_letter_actions. A dead letter is in its job's
project: a key bound to a project reaches only its jobs' (control.reach)."""

from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from ninja import Query, Router, Schema, Status
from ninja.errors import HttpError
from pydantic import ConfigDict, Field

from control import auth, examples, paging, reach, refusals, scopes
from control.executions_api import ExecutionOut, execution_numbered, one_as_json
from control.fields import ID_MAX, Name, RowId
from control.models import ApiKey
from scheduler.runs.refusals import OperationRefused
from scheduler.triage import dead_letter_actions
from scheduler.triage.dead_letters import DeadLetter, with_status

router = Router(tags=["dead letters"])


class DeadLetterOut(Schema):
    id: int
    execution: int
    job: str
    project: str
    scheduled_for: datetime
    attempt: int
    reason: str
    detail: str
    log_tail: str
    landed_at: datetime
    status: str
    replayed_at: datetime | None
    replayed_execution: int | None
    discarded_at: datetime | None


class DeadLetterPage(Schema):
    items: list[DeadLetterOut]
    next_cursor: str | None


class DeadLetterFilters(Schema):
    status: str = Field(DeadLetter.OPEN, description="open, replayed, discarded or all")
    job: Name | None = None
    limit: int = paging.DEFAULT_LIMIT
    cursor: str | None = None


class ReplayIn(Schema):
    model_config = ConfigDict(json_schema_extra=examples.schema(examples.REPLAY))

    force: bool = Field(False, description="replay even past CRONIQ_REPLAY_MAX_AGE")


class DiscardIn(Schema):
    model_config = ConfigDict(json_schema_extra=examples.schema(examples.DISCARD))

    ids: list[int] = Field(..., min_length=1, max_length=paging.MAX_LIMIT)


class DiscardOut(Schema):
    discarded: int


def as_json(dead_letter: DeadLetter) -> dict[str, Any]:
    execution = dead_letter.execution
    return {
        "id": dead_letter.pk,
        "execution": execution.pk,
        "job": execution.job.name,
        "project": execution.job.project,
        "scheduled_for": execution.scheduled_for,
        "attempt": execution.attempt,
        "reason": dead_letter.reason,
        "detail": dead_letter.detail,
        "log_tail": dead_letter.log_tail,
        "landed_at": dead_letter.landed_at,
        "status": dead_letter.status,
        "replayed_at": dead_letter.replayed_at,
        "replayed_execution": dead_letter.replayed_execution_id,
        "discarded_at": dead_letter.discarded_at,
    }


def dead_letter_numbered(dead_letter_id: int, key: ApiKey) -> DeadLetter:
    """The dead letter `dead_letter_id` that `key` reaches, or 404."""
    rows = reach.narrowed(key, DeadLetter.objects.select_related("execution__job"))
    dead_letter = rows.filter(pk=dead_letter_id).first()
    if dead_letter is None:
        raise HttpError(404, f"no dead letter {dead_letter_id}")
    return dead_letter


def filtered(filters: DeadLetterFilters) -> QuerySet:
    if filters.status not in (*DeadLetter.STATUSES, "all"):
        raise HttpError(422, f"status: one of {', '.join(DeadLetter.STATUSES)}, all")
    rows = DeadLetter.objects.select_related("execution__job")
    if filters.status != "all":
        rows = rows.filter(with_status(filters.status))
    if filters.job is not None:
        rows = rows.filter(execution__job__name=filters.job)
    return rows


@router.get("dead-letters", response=DeadLetterPage, auth=auth.needs(scopes.DEAD_LETTERS_READ))
def list_dead_letters(request: HttpRequest, filters: Query[DeadLetterFilters]) -> dict[str, Any]:
    rows, cursor = paging.page(
        reach.narrowed(request.auth, filtered(filters)),
        "id",
        filters.limit,
        filters.cursor,
        descending=True,
    )
    return {"items": [as_json(row) for row in rows], "next_cursor": cursor}


@router.post(
    "dead-letters/discard",
    response=DiscardOut,
    auth=auth.needs(scopes.DEAD_LETTERS_WRITE),
)
def discard_many(request: HttpRequest, body: DiscardIn) -> dict[str, int]:
    """Discard the open dead letters among `ids`; others are left alone."""
    if any(not 1 <= each <= ID_MAX for each in body.ids):
        raise HttpError(422, f"ids: each between 1 and {ID_MAX}")
    rows = reach.narrowed(request.auth, DeadLetter.objects.filter(pk__in=set(body.ids)))
    count = dead_letter_actions.discard(rows, timezone.now(), auth.actor(request.auth))
    return {"discarded": count}


@router.get(
    "dead-letters/{dead_letter_id}",
    response=DeadLetterOut,
    auth=auth.needs(scopes.DEAD_LETTERS_READ),
)
def show(request: HttpRequest, dead_letter_id: RowId) -> dict[str, Any]:
    return as_json(dead_letter_numbered(dead_letter_id, request.auth))


@router.post(
    "dead-letters/{dead_letter_id}/replay",
    response={202: ExecutionOut},
    auth=auth.needs(scopes.DEAD_LETTERS_WRITE),
)
def replay(
    request: HttpRequest, dead_letter_id: RowId, body: ReplayIn | None = None
) -> Status | JsonResponse:
    body = body or ReplayIn()
    dead_letter = dead_letter_numbered(dead_letter_id, request.auth)
    try:
        new = dead_letter_actions.replay(
            dead_letter, timezone.now(), auth.actor(request.auth), force=body.force
        )
    except OperationRefused as refusal:
        return refusals.response(refusal)
    return Status(202, one_as_json(execution_numbered(new.pk, request.auth)))


@router.delete(
    "dead-letters/{dead_letter_id}",
    response={204: None},
    auth=auth.needs(scopes.DEAD_LETTERS_WRITE),
)
def discard(request: HttpRequest, dead_letter_id: RowId) -> Status | JsonResponse:
    dead_letter = dead_letter_numbered(dead_letter_id, request.auth)
    rows = DeadLetter.objects.filter(pk=dead_letter.pk)
    if not dead_letter_actions.discard(rows, timezone.now(), auth.actor(request.auth)):
        return refusals.response(
            OperationRefused(f"dead letter {dead_letter.pk} was {dead_letter.status} already")
        )
    return Status(204, None)
