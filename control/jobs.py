"""Jobs through the management API (docs/design.md §8).

A job in the API has the fields of the apply file, checked by the very code
`manage.py apply` runs (`scheduler.apply.document.apply_item`), so both accept
and refuse the same things, plus the state operators see: paused (and
until when, and why), the next run, and who manages it (control.ownership).
Every write is audited with the key as actor. A job is in one project
(`project`): a key bound to a project reaches only its jobs
(control.reach), and a `project` in a write creates or moves the job there.

The values of secret-looking env variables (audit.changes.is_secret_env),
a container's among them, and http request headers
(audit.changes.is_secret_header) are shown masked to every key, as the
dashboard and the audit trail show them. A write that sends a masked value
back keeps the value stored under that name, so a read-modify-write never
replaces a secret with its mask; a masked value with nothing stored under
its name is refused.
"""

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from ninja.errors import HttpError

import audit
from audit.changes import (
    MASK,
    is_secret_env,
    is_secret_header,
    masked_container,
    masked_diff,
    masked_env,
    masked_http,
)
from calendars.validators import text_problem, text_problems
from control import ownership, paging, reach
from control.fields import checked_instant
from control.models import ApiKey
from core import db
from core.ownership import ManagedBy
from scheduler.apply.document import apply_item
from scheduler.apply.items import ApplyError, job_state, overlap_of
from scheduler.jobs import tags
from scheduler.models import Job
from scheduler.runs import operations

MAX_NEXT = 100


def fields(job: Job, *, writer: bool = False) -> dict[str, Any]:
    """The job as the API shows it. Its `webhook_url` runs the job with no
    key, so only a `writer` (a key that may change the job) is told it;
    any other reads null."""
    state = job_state(job)
    state["env"] = masked_env(state["env"])
    state["http"] = masked_http(state["http"])
    state["container"] = masked_container(state["container"])
    return {
        "name": job.name,
        "project": job.project,
        **state,
        "paused": job.paused_at is not None,
        "paused_until": job.paused_until,
        "pause_reason": job.pause_reason,
        "next_run_at": job.next_run_at,
        "webhook_url": job.webhook_url if writer else None,
        "completed": job.completed,
        "scheduled_runs": job.scheduled_runs,
    }


def get(name: str, key: ApiKey) -> Job:
    """The job named `name` that `key` reaches (control.reach), or 404. A
    name with NUL names no job (PostgreSQL refuses it in a query)."""
    rows = reach.narrowed(key, Job.objects.select_related("calendar"))
    job = None if "\x00" in name else rows.filter(name=name).first()
    if job is None:
        raise HttpError(404, f"no job named {name!r}")
    return job


def locked(name: str, key: ApiKey) -> Job:
    """The job named `name` that `key` reaches, its row locked until the
    transaction ends, or 404, in one query (its calendar is not loaded)."""
    if "\x00" in name:
        raise HttpError(404, f"no job named {name!r}")
    job = reach.narrowed(key, Job.objects.select_for_update()).filter(name=name).first()
    if job is None:
        raise HttpError(404, f"no job named {name!r}")
    return job


def listed(
    key: ApiKey,
    *,
    project: str | None = None,
    label: str | None = None,
    tag: str | None = None,
    enabled: bool | None = None,
    name: str | None = None,
    limit: int = paging.DEFAULT_LIMIT,
    cursor: str | None = None,
) -> tuple[list[Job], str | None]:
    """(jobs, next_cursor): the jobs `key` reaches by name, filtered."""
    jobs = reach.of_project(key, Job.objects.select_related("calendar"), project)
    if label is not None:
        jobs = carrying(jobs, label)
    if tag is not None:
        jobs = tags.carrying(jobs, tag)
    if enabled is not None:
        jobs = jobs.filter(enabled=enabled)
    if name:
        jobs = jobs.filter(name__startswith=name)
    return paging.page(jobs, "name", limit=limit, cursor=cursor)


def carrying(jobs: QuerySet, label: str) -> QuerySet:
    """Jobs whose labels include `label`."""
    return db.list_holds(jobs, "labels", label)


def kept_secrets(env: Any, stored: dict[str, str], where: str = "env") -> Any:
    """`env` as sent, each masked secret replaced by the value `stored` holds
    under its name; 422 naming the variable (`where`.NAME) when there is none."""
    if not isinstance(env, dict):
        return env  # apply's checks name the problem
    kept = dict(env)
    for name, value in env.items():
        if value != MASK or not is_secret_env(name):
            continue
        if name not in stored:
            raise HttpError(
                422,
                f"{where}.{name}: {MASK} is how the API shows a secret; send the real value",
            )
        kept[name] = stored[name]
    return kept


def kept_container_secrets(spec: Any, stored: dict[str, Any] | None) -> Any:
    """A container job's `spec` as sent, each masked secret of its env
    replaced by the value `stored` (the job's container) holds; 422 naming
    the variable when there is none."""
    if not isinstance(spec, dict) or not isinstance(spec.get("env"), dict):
        return spec  # apply's checks name the problem
    held = (stored or {}).get("env") or {}
    return {**spec, "env": kept_secrets(spec["env"], held, "container.env")}


def kept_header_secrets(request: Any, stored: dict[str, Any] | None) -> Any:
    """An http job's `request` as sent, each masked secret header replaced
    by the value `stored` (the job's request) holds under its name; 422
    naming the header when there is none."""
    if not isinstance(request, dict) or not isinstance(request.get("headers"), dict):
        return request  # apply's checks name the problem
    held = (stored or {}).get("headers") or {}
    headers = dict(request["headers"])
    for name, value in request["headers"].items():
        if value != MASK or not is_secret_header(name):
            continue
        if name not in held:
            raise HttpError(
                422,
                f"http.headers.{name}: {MASK} is how the API shows a secret; send the real value",
            )
        headers[name] = held[name]
    return {**request, "headers": headers}


def refuse_unstorable_text(item: Any) -> None:
    """422 naming the first field whose text the database cannot store."""
    problems = text_problems(item)
    if problems:
        where, problem = problems[0]
        raise HttpError(422, f"{where}: {problem}")


def write(item: dict[str, Any], *, key: ApiKey, now: datetime, actor: object) -> Any:
    """Write `item` (its `project` chosen: control.reach.chosen) as apply does."""
    try:
        return apply_item(
            "job",
            item,
            now=now,
            actor=actor,
            managed_by=ManagedBy.API,
            via="api",
            projects=reach.writable(key),
        )
    except ApplyError as e:
        raise HttpError(422, "; ".join(e.errors)) from None


def create(item: dict[str, Any], *, key: ApiKey, now: datetime, actor: object) -> Job:
    """201: a new job, managed by the API, in the project the item names
    (else the key's, else default); 409 when the name is taken."""
    item = dict(item)
    project = reach.chosen(key, item.pop("project", None))
    refuse_unstorable_text(item)  # before the name is looked up
    if "env" in item:
        item = {**item, "env": kept_secrets(item["env"], {})}
    if "http" in item:
        item = {**item, "http": kept_header_secrets(item["http"], {})}
    if "container" in item:
        item = {**item, "container": kept_container_secrets(item["container"], {})}
    name = item.get("name")
    taken = HttpError(409, f"a job named {name!r} already exists")
    if isinstance(name, str) and Job.objects.filter(name=name).exists():
        raise taken
    try:
        with transaction.atomic():
            write({**item, "project": project}, key=key, now=now, actor=actor)
    except IntegrityError:
        raise taken from None  # created by someone else meanwhile
    return get(name, key)


def update(name: str, patch: dict[str, Any], *, key: ApiKey, now: datetime, actor: object) -> Job:
    """Some fields of a job changed; the others as they are. A `project`
    moves it (control.reach.chosen)."""
    patch = dict(patch)
    adopt = ownership.adopt_flag(patch.pop("adopt", False))
    wanted = patch.pop("project", None)
    with transaction.atomic():
        job = locked(name, key)
        project = job.project if wanted is None else reach.chosen(key, wanted)
        adopted = ownership.check(job, adopt)
        if patch.get("name", name) != name:
            raise HttpError(422, "name: a job is addressed by its name and cannot be renamed")
        current = job_state(job)
        current.pop("managed_by")
        current.pop("managed_source")
        current.update(overlap_of(current, patch))
        if "env" in patch:
            patch["env"] = kept_secrets(patch["env"], current["env"])
        if "http" in patch:
            patch["http"] = kept_header_secrets(patch["http"], current["http"])
        if "container" in patch:
            patch["container"] = kept_container_secrets(patch["container"], current["container"])
        item = {"name": name, **current, **patch, "project": project}
        write(item, key=key, now=now, actor=actor)
        if adopted:
            ownership.record_adopted(job, now=now, actor=actor)
    return get(name, key)


def delete(name: str, *, key: ApiKey, adopt: bool, now: datetime, actor: object) -> None:
    """The job and its history, gone; audited with what it was."""
    with transaction.atomic():
        job = locked(name, key)
        adopted = ownership.check(job, adopt)
        if adopted:
            ownership.record_adopted(job, now=now, actor=actor)
        removed = masked_diff({k: [v, None] for k, v in job_state(job).items()})
        data = {"name": name, "diff": removed, "via": "api"}
        audit.record("job.deleted", target=job, actor=actor, at=now, data=data)
        job.delete()


def pause(
    name: str,
    *,
    key: ApiKey,
    reason: str,
    until: datetime | None,
    now: datetime,
    actor: object,
) -> Job:
    """Pause a job (a paused one stays as it is); with `until` it resumes
    by itself at that instant (bare, on the job's clock)."""
    job = get(name, key)
    if until is not None:
        # In UTC: PostgreSQL refuses offsets past 15:59; near the end of
        # time, converting (or the loop's arithmetic) would overflow.
        until = checked_instant("until", until, job.timezone)
        if until <= now:
            raise HttpError(422, "until: must be in the future")
    if len(reason) > Job._meta.get_field("pause_reason").max_length:
        raise HttpError(422, "reason: at most 200 characters")
    if text_problem(reason):
        raise HttpError(422, f"reason: {text_problem(reason)}")
    operations.pause(Job.objects.filter(pk=job.pk), now, actor, reason=reason, until=until)
    return get(name, key)


def resume(name: str, *, key: ApiKey, now: datetime, actor: object) -> Job:
    job = get(name, key)
    operations.resume(Job.objects.filter(pk=job.pk), now, actor)
    return get(name, key)


def upcoming(name: str, *, key: ApiKey, count: int, after: datetime) -> list[datetime]:
    """The next `count` instants the job fires strictly after `after`
    (bare, on the job's clock)."""
    if not 1 <= count <= MAX_NEXT:
        raise HttpError(422, f"count: between 1 and {MAX_NEXT}")
    job = get(name, key)
    after = checked_instant("after", after, job.timezone)
    try:
        return job.upcoming(after, count)
    except ValueError as e:  # a stored schedule or calendar that no longer evaluates
        raise HttpError(422, f"schedule: {e}") from None
