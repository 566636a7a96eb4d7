"""`/api/v1/executions` (DESIGN.md §8): the history of runs, their logs, and
an operator's cancel and retry.

Mounted at /v1/ as "executions/...", beside the runner protocol's
/v1/executions/{id}/logs and /finish (runners.api): the paths differ
("log", not "logs"), so neither shadows the other.
"""

from datetime import datetime

from django.utils import timezone
from ninja import Query, Router, Schema, Status
from ninja.errors import HttpError
from pydantic import AwareDatetime, Field

from control import auth, paging, refusals, scopes
from control.auth import needs
from scheduler import operations
from scheduler.log_chunks import read_log
from scheduler.models import Execution, Job
from scheduler.refusals import OperationRefused

router = Router(tags=["executions"])

STATES = [state for state, _ in Execution.STATES]
TRIGGERS = [trigger for trigger, _ in Execution.TRIGGERS]


class ExecutionOut(Schema):
    id: int
    job: str
    scheduled_for: datetime
    attempt: int
    trigger: str
    state: str
    runner: str | None
    created_at: datetime
    claimed_at: datetime | None
    finished_at: datetime | None
    exit_code: int | None
    error: str


class ExecutionPage(Schema):
    items: list[ExecutionOut]
    next_cursor: str | None


class ExecutionFilters(Schema):
    job: str | None = None
    state: str | None = None
    trigger: str | None = None
    since: AwareDatetime | None = Field(None, description="scheduled_for at or after")
    until: AwareDatetime | None = Field(None, description="scheduled_for before")
    limit: int = paging.DEFAULT_LIMIT
    cursor: str | None = None


class LogOut(Schema):
    data: str
    offset: int
    complete: bool


def as_json(execution):
    return {
        "id": execution.pk,
        "job": execution.job.name,
        "scheduled_for": execution.scheduled_for,
        "attempt": execution.attempt,
        "trigger": execution.trigger,
        "state": execution.state,
        "runner": execution.runner.name if execution.runner_id else None,
        "created_at": execution.created_at,
        "claimed_at": execution.claimed_at,
        "finished_at": execution.finished_at,
        "exit_code": execution.exit_code,
        "error": execution.error,
    }


def execution_numbered(execution_id):
    execution = Execution.objects.select_related("job", "runner").filter(pk=execution_id).first()
    if execution is None:
        raise HttpError(404, f"no execution {execution_id}")
    return execution


def one_of(field, value, known):
    if value is not None and value not in known:
        raise HttpError(422, f"{field}: one of {', '.join(known)}")


def filtered(filters):
    """The executions the filters select; the job by name (a name that
    names no job selects none)."""
    one_of("state", filters.state, STATES)
    one_of("trigger", filters.trigger, TRIGGERS)
    rows = Execution.objects.select_related("job", "runner")
    if filters.job is not None:
        job_id = Job.objects.filter(name=filters.job).values_list("pk", flat=True).first()
        rows = rows.filter(job_id=job_id) if job_id is not None else rows.none()
    if filters.state is not None:
        rows = rows.filter(state=filters.state)
    if filters.trigger is not None:
        rows = rows.filter(trigger=filters.trigger)
    if filters.since is not None:
        rows = rows.filter(scheduled_for__gte=filters.since)
    if filters.until is not None:
        rows = rows.filter(scheduled_for__lt=filters.until)
    return rows


@router.get(
    "executions",
    auth=needs(scopes.EXECUTIONS_READ),
    response=ExecutionPage,
    summary="Executions, newest first",
)
def list_executions(request, filters: Query[ExecutionFilters]):
    # Newest first by id: the primary key (or exec_job_newest for one job)
    # is read backwards from the cursor, however many rows there are.
    rows, cursor = paging.page(
        filtered(filters), "id", filters.limit, filters.cursor, descending=True
    )
    return {"items": [as_json(e) for e in rows], "next_cursor": cursor}


@router.get("executions/{execution_id}", auth=needs(scopes.EXECUTIONS_READ), response=ExecutionOut)
def show(request, execution_id: int):
    return as_json(execution_numbered(execution_id))


@router.get("executions/{execution_id}/log", auth=needs(scopes.EXECUTIONS_READ), response=LogOut)
def log(request, execution_id: int, offset: int = 0):
    execution = execution_numbered(execution_id)
    if offset < 0:
        raise HttpError(422, "offset: must be 0 or more")
    try:
        data, end = read_log(execution.pk, offset)
    except ValueError as e:
        raise HttpError(422, f"offset: {e}") from None
    # Logs are accepted only while the run holds its lease: a finished
    # run's log is whole.
    return {"data": data, "offset": end, "complete": execution.state in Execution.FINAL_STATES}


@router.post(
    "executions/{execution_id}/cancel", auth=needs(scopes.EXECUTIONS_WRITE), response=ExecutionOut
)
def cancel(request, execution_id: int):
    execution = execution_numbered(execution_id)
    if execution.state in Execution.FINAL_STATES and execution.state != Execution.CANCELLED:
        return refusals.response(
            OperationRefused(f"execution {execution.pk} is {execution.state}: nothing to cancel")
        )
    rows = Execution.objects.filter(pk=execution.pk)
    operations.cancel(rows, timezone.now(), auth.actor(request.auth))
    return as_json(execution_numbered(execution_id))


@router.post(
    "executions/{execution_id}/retry",
    auth=needs(scopes.EXECUTIONS_WRITE),
    response={202: ExecutionOut},
)
def retry(request, execution_id: int):
    execution = execution_numbered(execution_id)
    try:
        new = operations.retry(execution, timezone.now(), auth.actor(request.auth))
    except OperationRefused as refusal:
        return refusals.response(refusal)
    return Status(202, as_json(execution_numbered(new.pk)))
