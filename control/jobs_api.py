"""`/api/v1/jobs`: list, create, read, change, delete, pause, resume and
the next fire times of jobs, addressed by name (docs/design.md §8), the
list filtered by `?project=` among others. The rules are in control.jobs;
each view names its scope."""

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Body, Query, Router, Schema, Status
from pydantic import ConfigDict

from control import auth, examples, jobs, paging, scopes
from core.text import Text  # text the database can store

router = Router(tags=["jobs"])


class JobOut(Schema):
    name: str
    project: str
    description: str
    schedule: str
    timezone: str
    kind: str = "shell"
    command: str
    # An http job's request (headers named like secrets masked); null for the other kinds.
    http: dict[str, Any] | None = None
    # What a container job runs (env values named like secrets masked); null for the others.
    container: dict[str, Any] | None = None
    env: dict[str, Any]
    # Limits (docs/design.md §15): sizes in bytes; null: none (max_output:
    # the server's log limit).
    max_output: int | None = None
    on_max_output: str = "truncate"
    max_memory: int | None = None
    max_cpu_seconds: int | None = None
    success_exit_codes: list[int] = []
    stdin: str = ""
    run_as: str = ""
    run_on_register: bool = False
    schedules: list[Any] = []
    at: list[str] = []
    not_before: datetime | None = None
    not_after: datetime | None = None
    max_runs: int | None = None
    webhook: bool = False
    webhook_secret: str = ""
    # Absolute; null without a webhook, and to a key without jobs:write.
    webhook_url: str | None = None
    calendar: str | None
    calendar_policy: str
    labels: list[Any]
    tags: list[str] = []
    singleton: bool
    overlap: str = "allow"
    max_concurrent: int | None = None
    max_queue: int | None = None
    jitter: int | None = None
    run_on: str = "one"
    stagger: int | None = None
    on_success: list[str] = []
    on_failure: list[str] = []
    requires: list[dict[str, Any]] = []
    requires_policy: str = "wait"
    requires_timeout: int = 3600
    concurrency_group: str | None = None
    timeout: int | None
    retries: int
    retry_backoff: int
    misfire_policy: str
    enabled: bool
    owner: str
    max_duration: int | None
    min_duration: int | None
    maintenance: str = "skip"
    pause_after_failures: int | None = None
    paused: bool
    paused_until: datetime | None
    pause_reason: str
    next_run_at: datetime | None
    # `max_runs`: the scheduled occurrences counted, and whether they are all
    # done (the job then disabled itself).
    completed: bool = False
    scheduled_runs: int = 0
    managed_by: str
    managed_source: str = ""


def shown(request: HttpRequest, job: Any) -> dict[str, Any]:
    """The job as the caller's key may see it: the webhook URL only to a
    key that may change jobs (control.jobs.fields)."""
    return jobs.fields(job, writer=request.auth.allows(scopes.JOBS_WRITE))


class JobPage(Schema):
    items: list[JobOut]
    next_cursor: str | None


class PauseIn(Schema):
    model_config = ConfigDict(json_schema_extra=examples.schema(examples.PAUSE))

    reason: str = ""
    until: datetime | None = None


class NextOut(Schema):
    instants: list[str]


class JobFilters(Schema):
    project: Text(0, 100) | None = None
    label: Text(0, 200) | None = None
    tag: Text(0, 200) | None = None
    enabled: bool | None = None
    name: Text(0, 200) | None = None
    limit: int = paging.DEFAULT_LIMIT
    cursor: Text(0, 1000) | None = None


@router.get("jobs", response=JobPage, auth=auth.needs(scopes.JOBS_READ))
def list_jobs(request: HttpRequest, filters: Query[JobFilters]) -> dict[str, Any]:
    rows, cursor = jobs.listed(request.auth, **filters.dict())
    return {"items": [shown(request, job) for job in rows], "next_cursor": cursor}


@router.post(
    "jobs",
    response={201: JobOut},
    auth=auth.needs(scopes.JOBS_WRITE),
    openapi_extra=examples.body(examples.JOB),
)
def create_job(request: HttpRequest, item: Body[dict[str, Any]]) -> Status:
    job = jobs.create(item, key=request.auth, now=timezone.now(), actor=auth.actor(request.auth))
    return Status(201, shown(request, job))


@router.get("jobs/{name}", response=JobOut, auth=auth.needs(scopes.JOBS_READ))
def get_job(request: HttpRequest, name: str) -> dict[str, Any]:
    return shown(request, jobs.get(name, request.auth))


@router.patch(
    "jobs/{name}",
    response=JobOut,
    auth=auth.needs(scopes.JOBS_WRITE),
    openapi_extra=examples.body(examples.JOB_PATCH),
)
def change_job(request: HttpRequest, name: str, patch: Body[dict[str, Any]]) -> dict[str, Any]:
    now, actor = timezone.now(), auth.actor(request.auth)
    job = jobs.update(name, patch, key=request.auth, now=now, actor=actor)
    return shown(request, job)


@router.delete("jobs/{name}", response={204: None}, auth=auth.needs(scopes.JOBS_WRITE))
def delete_job(request: HttpRequest, name: str, adopt: bool = False) -> Status:
    now, actor = timezone.now(), auth.actor(request.auth)
    jobs.delete(name, key=request.auth, adopt=adopt, now=now, actor=actor)
    return Status(204, None)


@router.post("jobs/{name}/pause", response=JobOut, auth=auth.needs(scopes.JOBS_WRITE))
def pause_job(request: HttpRequest, name: str, body: PauseIn | None = None) -> dict[str, Any]:
    body = body or PauseIn()
    job = jobs.pause(
        name,
        key=request.auth,
        reason=body.reason,
        until=body.until,
        now=timezone.now(),
        actor=auth.actor(request.auth),
    )
    return shown(request, job)


@router.post("jobs/{name}/resume", response=JobOut, auth=auth.needs(scopes.JOBS_WRITE))
def resume_job(request: HttpRequest, name: str) -> dict[str, Any]:
    job = jobs.resume(name, key=request.auth, now=timezone.now(), actor=auth.actor(request.auth))
    return shown(request, job)


@router.get("jobs/{name}/next", response=NextOut, auth=auth.needs(scopes.JOBS_READ))
def next_runs(
    request: HttpRequest, name: str, count: int = 10, after: datetime | None = None
) -> dict[str, list[str]]:
    instants = jobs.upcoming(name, key=request.auth, count=count, after=after or timezone.now())
    return {"instants": [instant.isoformat() for instant in instants]}
