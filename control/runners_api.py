"""Runners over the management API (docs/design.md §8): list them, drain, resume
or forget one, as the admin's actions do (dispatch.identity).

Mounted under /v1/ beside the runner protocol's /v1/runners/ routes, with
paths of its own (`runners`, `runners/{runner_id}/drain`), so that protocol
is untouched.

Runners are the whole install's, shared by every project: a key bound to a
project reads them, but only a global key drains, resumes or forgets one
(control.reach.needs_global).
"""

from datetime import datetime
from typing import Any, Literal

from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from ninja import Query, Router, Schema
from ninja.errors import HttpError

from control import auth, paging, reach, scopes
from control.schemas import ERRORS, PageQuery
from dispatch import identity
from runners.models import Runner
from scheduler.models import Execution

# "runners" is the runner protocol's tag: the operators' calls get their own.
router = Router(tags=["runners (management)"])


class RunnerOut(Schema):
    id: int
    name: str
    labels: list[str]
    state: str
    drained: bool
    flapping: bool
    version: str
    hostname: str
    capacity: int
    # What its agent announced it acts on (docs/design.md §4): work needing
    # a feature it lacks (stdin, run_as, http) waits for another runner.
    features: list[str]
    registered_at: datetime
    last_seen_at: datetime
    running: int


class RunnerPage(Schema):
    items: list[RunnerOut]
    next_cursor: str | None


class ForgottenOut(Schema):
    name: str
    released: list[int]


class RunnerFilters(PageQuery):
    state: Literal[Runner.ONLINE, Runner.DRAINING, Runner.OFFLINE] | None = None


def with_running(queryset: QuerySet) -> QuerySet:
    return queryset.annotate(
        running=Count("executions", filter=Q(executions__state=Execution.RUNNING))
    )


def find(runner_id: int) -> Runner:
    runner = None
    if identity.is_db_id(runner_id):
        runner = with_running(Runner.objects.filter(pk=runner_id)).first()
    if runner is None:
        raise HttpError(404, f"no runner {runner_id}")
    return runner


@router.get("runners", auth=auth.needs(scopes.RUNNERS_READ), response={200: RunnerPage, **ERRORS})
def list_runners(request: HttpRequest, filters: Query[RunnerFilters]) -> dict[str, Any]:
    """Runners by id, with how many executions each is running."""
    runners = with_running(Runner.objects.all())
    if filters.state:
        runners = runners.filter(state=filters.state)
    rows, cursor = paging.page(runners, "id", filters.limit, filters.cursor)
    return {"items": rows, "next_cursor": cursor}


@router.post(
    "runners/{runner_id}/drain",
    auth=auth.needs(scopes.RUNNERS_WRITE),
    response={200: RunnerOut, **ERRORS},
)
def drain(request: HttpRequest, runner_id: int) -> Runner:
    """Give the runner no new work; what it runs now may finish."""
    reach.needs_global(request.auth, "draining a runner")
    runner = find(runner_id)
    identity.drain(runner, timezone.now(), actor=auth.actor(request.auth))
    return runner


@router.post(
    "runners/{runner_id}/resume",
    auth=auth.needs(scopes.RUNNERS_WRITE),
    response={200: RunnerOut, **ERRORS},
)
def resume(request: HttpRequest, runner_id: int) -> Runner:
    """Undo a drain: the runner gets work again."""
    reach.needs_global(request.auth, "resuming a runner")
    runner = find(runner_id)
    identity.resume(runner, timezone.now(), actor=auth.actor(request.auth))
    return runner


@router.post(
    "runners/{runner_id}/forget",
    auth=auth.needs(scopes.RUNNERS_WRITE),
    response={200: ForgottenOut, **ERRORS},
)
def forget(request: HttpRequest, runner_id: int) -> dict[str, Any]:
    """Release the runner's executions now and delete it; it registers anew
    if it comes back."""
    reach.needs_global(request.auth, "forgetting a runner")
    runner = find(runner_id)
    released = identity.forget(runner, timezone.now(), actor=auth.actor(request.auth))
    return {"name": runner.name, "released": [execution.pk for execution in released]}
