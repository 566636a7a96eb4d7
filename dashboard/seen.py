"""What a user sees on the dashboard: the rows of the projects where its
role (or a global group's permission) lets it view them (docs/design.md §11).

Every page reads its jobs, runs, dead letters and checks through here; a
row outside is 404, as if it did not exist. The user's roles are read
once per request (`projects.scoping.roles_of`); a narrowed list is one
condition on the rows' project, never a query per row.
"""

from typing import Any

from django.db.models import QuerySet
from django.urls import resolve, reverse

from checks.models import Check
from projects import names, scoping
from scheduler.models import ConcurrencyGroup, Execution, Job
from scheduler.triage.dead_letters import DeadLetter

VIEW_JOB = "scheduler.view_job"


def opens(user: Any, needed: tuple[str, ...]) -> bool:
    """Whether a page needing the permissions `needed` opens to `user`:
    each held globally or by a role in some project (the page then shows
    that project's rows alone)."""
    return all(scoping.may(user, permission) for permission in needed)


def pages_open(user: Any, url_names: list[str]) -> set[str]:
    """The dashboard pages among `url_names` that open to `user` (each
    view keeps the permissions it needs: `needed_permissions`)."""
    return {
        name
        for name in url_names
        if opens(user, getattr(resolve(reverse(name)).func, "needed_permissions", ()))
    }


def everything(user: Any) -> bool:
    """Whether `user` sees every job (a superuser, a global group)."""
    return scoping.everywhere(user, VIEW_JOB)


def projects(user: Any) -> list[str]:
    """The projects whose jobs `user` sees, by name: the project filter's choices."""
    if everything(user):
        return sorted(names.known())
    return sorted(scoping.projects_where(user, VIEW_JOB))


def project_set(user: Any) -> tuple[str, ...] | None:
    """The projects `user` sees, or None for every one: what a page's
    aggregates (counts, the heat-map) are counted over and cached by."""
    return None if everything(user) else tuple(projects(user))


def jobs(user: Any, rows: QuerySet | None = None) -> QuerySet:
    return scoping.visible(user, VIEW_JOB, Job.objects.all() if rows is None else rows)


def executions(user: Any, rows: QuerySet | None = None) -> QuerySet:
    rows = Execution.objects.all() if rows is None else rows
    return scoping.visible(user, "scheduler.view_execution", rows, "job__project")


def runs(user: Any, rows: list[Execution]) -> list[Execution]:
    """Those of the runs `rows` (their jobs read along) that `user` sees."""
    permission = "scheduler.view_execution"
    if scoping.everywhere(user, permission):
        return rows
    projects = scoping.projects_where(user, permission)
    return [run for run in rows if run.job.project in projects]


def dead_letters(user: Any, rows: QuerySet | None = None) -> QuerySet:
    rows = DeadLetter.objects.all() if rows is None else rows
    return scoping.visible(user, "scheduler.view_deadletter", rows, "execution__job__project")


def checks(user: Any, rows: QuerySet | None = None) -> QuerySet:
    return scoping.visible(user, "checks.view_check", Check.objects.all() if rows is None else rows)


def group_names(user: Any) -> set[str] | None:
    """The concurrency groups `user` sees by name, or None for every one."""
    permission = "scheduler.view_concurrencygroup"
    if scoping.everywhere(user, permission):
        return None
    rows = scoping.visible(user, permission, ConcurrencyGroup.objects.all())
    return set(rows.values_list("name", flat=True))
