"""Which project a row belongs to, and which projects a user may act in.

A row names its project itself (`project`, a slug) or through what it
belongs to: an execution through its job, a dead letter through its
execution, a role through its project. An API key with no project is
global: no project role reaches it.
"""

import contextlib
from typing import Any

from django.db.models import Model, QuerySet

from projects import roles

# Where a user's roles are kept while a request lasts: {project: role}.
CACHE = "_croniq_project_roles"


def project_of(row: Any) -> str | None:
    """The slug of the project `row` belongs to, None for a global row."""
    from projects.models import Project, Role

    if isinstance(row, Project):
        return row.name
    if isinstance(row, Role):
        return row.project.name
    value = getattr(row, "project", None)
    if isinstance(value, str):
        return value or None
    if hasattr(row, "job_id") and getattr(row, "job_id", None) is not None:
        return row.job.project
    if hasattr(row, "execution_id") and getattr(row, "execution_id", None) is not None:
        return project_of(row.execution)
    return None


def project_lookup(model: type[Model]) -> str | None:
    """The lookup from a row of `model` to its project's slug, as
    `project_of` walks it: `project` (its own), `project__name` (a role),
    `job__project` (an execution), `execution__job__project` (a dead
    letter); None for a model of no project (a runner)."""
    from projects.models import Project

    if model is Project:
        return "name"
    fields = {field.name: field for field in model._meta.concrete_fields}
    own = fields.get("project")
    if own is not None:
        return "project__name" if own.is_relation else "project"
    for name in ("job", "execution"):
        through = fields.get(name)
        if through is not None and through.is_relation:
            inner = project_lookup(through.related_model)
            return f"{name}__{inner}" if inner else None
    return None


def roles_of(user: Any) -> dict[str, str]:
    """{project: the highest role `user` holds there}, read once per user object."""
    cached = getattr(user, CACHE, None)
    if cached is not None:
        return cached
    from projects.models import Role

    held: dict[str, list[str]] = {}
    if getattr(user, "is_active", False):
        for project, role in Role.objects.of(user).values_list("project__name", "role"):
            held.setdefault(project, []).append(role)
    found = {project: role for project, names in held.items() if (role := roles.highest(names))}
    with contextlib.suppress(AttributeError):  # AnonymousUser and other fixed objects
        setattr(user, CACHE, found)
    return found


def forget(user: Any) -> None:
    """Drop the cached roles of `user` (after they changed)."""
    if hasattr(user, CACHE):
        delattr(user, CACHE)


def role_in(user: Any, project: str | None) -> str | None:
    return roles_of(user).get(project) if project else None


def projects_where(user: Any, permission: str) -> set[str]:
    """The projects in which `user`'s roles grant `permission`."""
    return {p for p, role in roles_of(user).items() if roles.grants(role, permission)}


def everywhere(user: Any, permission: str) -> bool:
    """Whether `user` holds `permission` for every project: a superuser,
    or a global group's model permission (docs/design.md §11)."""
    return bool(user.is_active and user.has_perm(permission))


def may(user: Any, permission: str, row: Any = None) -> bool:
    """Whether `user` holds `permission` for `row`; without a row, for at
    least one project (what the admin asks to show a model at all)."""
    if everywhere(user, permission):
        return True
    if row is None:
        return bool(projects_where(user, permission))
    return roles.grants(role_in(user, project_of(row)), permission)


def visible(
    user: Any, permission: str, rows: QuerySet[Any], field: str = "project"
) -> QuerySet[Any]:
    """`rows` narrowed to the projects where `user` holds `permission`
    (`field` is the lookup of the project's slug: `job__project` for runs)."""
    if everywhere(user, permission):
        return rows
    return rows.filter(**{f"{field}__in": sorted(projects_where(user, permission))})
