"""`/api/v1/executions` (docs/design.md §8): the history of runs, their logs, and
an operator's cancel and retry. A run is in its job's project: a key bound
to a project reaches only the runs of its jobs (control.reach).

Mounted at /v1/ as "executions/...", beside the runner protocol's
/v1/executions/{id}/logs and /finish (dispatch.api): the paths differ
("log", not "logs"), so neither shadows the other.
"""

from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from ninja import Query, Router, Schema, Status
from ninja.errors import HttpError
from ninja.responses import NinjaJSONEncoder
from pydantic import Field

from control import auth, paging, reach, refusals, scopes
from control.auth import needs
from control.fields import Instant, Name, RowId
from control.models import ApiKey
from runners.models import Runner
from scheduler.models import Execution, Job
from scheduler.runs import operations
from scheduler.runs.log_chunks import read_log
from scheduler.runs.refusals import OperationRefused

router = Router(tags=["executions"])

STATES = [state for state, _ in Execution.STATES]
TRIGGERS = [trigger for trigger, _ in Execution.TRIGGERS]


# The columns an Execution's JSON needs: a page loads no more (no log
# counters, no lease).
SHOWN = (
    "id", "job_id", "scheduled_for", "attempt", "trigger", "state", "runner_id", "pinned_to",
    "created_at", "claimed_at", "finished_at", "exit_code", "error",
)  # fmt: skip


class ExecutionOut(Schema):
    id: int
    job: str
    project: str
    scheduled_for: datetime
    attempt: int
    trigger: str
    state: str
    runner: str | None
    pinned_to: str = ""
    created_at: datetime
    claimed_at: datetime | None
    finished_at: datetime | None
    exit_code: int | None
    error: str


class ExecutionPage(Schema):
    items: list[ExecutionOut]
    next_cursor: str | None


class ExecutionFilters(Schema):
    job: Name | None = None
    state: str | None = None
    trigger: str | None = None
    since: Instant | None = Field(None, description="scheduled_for at or after")
    until: Instant | None = Field(None, description="scheduled_for before")
    limit: int = paging.DEFAULT_LIMIT
    cursor: str | None = None


class LogOut(Schema):
    data: str
    offset: int
    complete: bool


def as_json(execution: Execution, job: tuple[str, str], runner_name: str | None) -> dict[str, Any]:
    """The execution as the API shows it; `job` is its job's (name, project)."""
    return {
        "id": execution.pk,
        "job": job[0],
        "project": job[1],
        "scheduled_for": execution.scheduled_for,
        "attempt": execution.attempt,
        "trigger": execution.trigger,
        "state": execution.state,
        "runner": runner_name,
        "pinned_to": execution.pinned_to,
        "created_at": execution.created_at,
        "claimed_at": execution.claimed_at,
        "finished_at": execution.finished_at,
        "exit_code": execution.exit_code,
        "error": execution.error,
    }


def one_as_json(execution: Execution) -> dict[str, Any]:
    runner_name = execution.runner.name if execution.runner_id else None
    return as_json(execution, (execution.job.name, execution.job.project), runner_name)


def page_as_json(rows: list[Execution]) -> list[dict[str, Any]]:
    """A page's executions with their job and runner names, read in one
    query each: joined into the page's own query, the planner may start
    from the jobs and sort, instead of reading the newest ids in order."""
    found = Job.objects.filter(pk__in={e.job_id for e in rows}).values_list("pk", "name", "project")
    jobs = {pk: (name, project) for pk, name, project in found}
    runner_ids = {e.runner_id for e in rows if e.runner_id}
    runners = dict(Runner.objects.filter(pk__in=runner_ids).values_list("pk", "name"))
    return [as_json(e, jobs[e.job_id], runners.get(e.runner_id)) for e in rows]


def execution_numbered(execution_id: int, key: ApiKey) -> Execution:
    """The execution `execution_id` that `key` reaches (control.reach), or 404."""
    rows = reach.narrowed(key, Execution.objects.select_related("job", "runner"))
    execution = rows.filter(pk=execution_id).first()
    if execution is None:
        raise HttpError(404, f"no execution {execution_id}")
    return execution


def one_of(field: str, value: str | None, known: tuple[str, ...] | list[str]) -> None:
    if value is not None and value not in known:
        raise HttpError(422, f"{field}: one of {', '.join(known)}")


def filtered(filters: ExecutionFilters) -> QuerySet:
    """The executions the filters select; the job by name (a name that
    names no job selects none)."""
    one_of("state", filters.state, STATES)
    one_of("trigger", filters.trigger, TRIGGERS)
    rows = Execution.objects.only(*SHOWN)
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
def list_executions(request: HttpRequest, filters: Query[ExecutionFilters]) -> JsonResponse:
    # Newest first by id: the primary key (or exec_job_newest for one job)
    # is read backwards from the cursor, however many rows there are.
    rows, cursor = paging.page(
        reach.narrowed(request.auth, filtered(filters)),
        "id",
        filters.limit,
        filters.cursor,
        descending=True,
    )
    # Built here and not checked again against ExecutionPage (which
    # documents it): validating each item would double a page's time.
    page = {"items": page_as_json(rows), "next_cursor": cursor}
    return JsonResponse(page, encoder=NinjaJSONEncoder)


@router.get("executions/{execution_id}", auth=needs(scopes.EXECUTIONS_READ), response=ExecutionOut)
def show(request: HttpRequest, execution_id: RowId) -> dict[str, Any]:
    return one_as_json(execution_numbered(execution_id, request.auth))


@router.get("executions/{execution_id}/log", auth=needs(scopes.EXECUTIONS_READ), response=LogOut)
def log(request: HttpRequest, execution_id: RowId, offset: int = 0) -> dict[str, Any]:
    execution = execution_numbered(execution_id, request.auth)
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
def cancel(request: HttpRequest, execution_id: RowId) -> dict[str, Any] | JsonResponse:
    execution = execution_numbered(execution_id, request.auth)
    if execution.state in Execution.FINAL_STATES and execution.state != Execution.CANCELLED:
        return refusals.response(
            OperationRefused(f"execution {execution.pk} is {execution.state}: nothing to cancel")
        )
    rows = Execution.objects.filter(pk=execution.pk)
    operations.cancel(rows, timezone.now(), auth.actor(request.auth))
    return one_as_json(execution_numbered(execution_id, request.auth))


@router.post(
    "executions/{execution_id}/retry",
    auth=needs(scopes.EXECUTIONS_WRITE),
    response={202: ExecutionOut},
)
def retry(request: HttpRequest, execution_id: RowId) -> Status | JsonResponse:
    execution = execution_numbered(execution_id, request.auth)
    try:
        new = operations.retry(execution, timezone.now(), auth.actor(request.auth))
    except OperationRefused as refusal:
        return refusals.response(refusal)
    return Status(202, one_as_json(execution_numbered(new.pk, request.auth)))
