"""`POST /api/v1/jobs/{name}/trigger` and `.../backfill` (docs/design.md §8):
running a job outside its schedule. The rules are in scheduler.firing.triggers and
scheduler.firing.backfill; this module reads the call and shapes the answer."""

from datetime import datetime
from typing import Annotated

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from ninja import Body, Router, Schema, Status
from pydantic import ConfigDict, StrictBool

from control import auth, examples, jobs, refusals, scopes
from control.auth import needs, needs_in_db_thread
from control.fields import LocalInstant, checked_instant
from control.models import ApiKey
from core.db_threads import run_db
from core.text import Text
from scheduler.firing import backfill, fanout, triggers
from scheduler.runs.refusals import OperationRefused

router = Router(tags=["jobs"])


class TriggerIn(Schema):
    model_config = ConfigDict(json_schema_extra=examples.schema(examples.TRIGGER))

    idempotency_key: Text(1, 200) | None = None
    env: dict[Text(1, 200), Text(0, 100_000)] | None = None
    # Bare (no offset): on the job's clock, as every instant of a job's call.
    scheduled_for: LocalInstant | None = None


class TriggerOut(Schema):
    execution_id: int
    deduplicated: bool
    # The runs of the triggered occurrence: execution_id alone, or for a
    # `run_on: all` job the latest run on each runner, by runner name.
    execution_ids: list[int]


class BackfillIn(Schema):
    model_config = ConfigDict(json_schema_extra=examples.schema(examples.BACKFILL))

    start: LocalInstant
    end: LocalInstant
    dry_run: StrictBool = False


class BackfillOut(Schema):
    instants: list[datetime]
    created: int


# Async, its work in one step on the runner API's database threads: a
# trigger is on the path from a CI pipeline to a runner starting the job
# (trigger -> running), and the thread keeps its connection between calls.
@router.post(
    "jobs/{name}/trigger",
    auth=needs_in_db_thread(scopes.JOBS_TRIGGER),
    response={202: TriggerOut},
    summary="Run a job now",
)
async def trigger(
    request: HttpRequest, name: str, body: Annotated[TriggerIn | None, Body()] = None
) -> Status | JsonResponse:
    body = body or TriggerIn()
    actor = auth.actor(request.auth)
    try:
        done, runs = await run_db(trigger_step, name, request.auth, timezone.now(), actor, body)
    except OperationRefused as refusal:
        return refusals.response(refusal)
    answer = {"execution_id": done.execution.pk, "deduplicated": done.deduplicated}
    return Status(202, {**answer, "execution_ids": runs})


def trigger_step(
    name: str, key: ApiKey, now: datetime, actor: object, body: TriggerIn
) -> tuple[triggers.Triggered, list[int]]:
    """(Triggered, the ids of every run of its occurrence)."""
    # The job is read and locked in one query (a round trip fewer than
    # reading it, then locking it).
    with transaction.atomic():
        job = jobs.locked(name, key)
        at = body.scheduled_for
        if at is not None:
            at = checked_instant("scheduled_for", at, job.timezone)
        done = triggers.trigger_locked(job, now, actor, body.idempotency_key, body.env, at)
    runs = [run.pk for run in fanout.occurrence_runs(done.execution)] or [done.execution.pk]
    return done, runs


@router.post(
    "jobs/{name}/backfill",
    auth=needs(scopes.JOBS_TRIGGER),
    response={202: BackfillOut},
    summary="Run a job for the past instants of its schedule in a range",
)
def backfill_range(request: HttpRequest, name: str, body: BackfillIn) -> Status | JsonResponse:
    job = jobs.get(name, request.auth)
    start = checked_instant("start", body.start, job.timezone)
    end = checked_instant("end", body.end, job.timezone)
    actor = auth.actor(request.auth)
    try:
        done = backfill.backfill(job, start, end, timezone.now(), actor, body.dry_run)
    except OperationRefused as refusal:
        return refusals.response(refusal)
    return Status(202, {"instants": done.instants, "created": done.created})
