"""What an API key reaches (docs/design.md §11): a key bound to a project
sees and changes that project's rows only; a global key (no project),
every project's.

To a bound key everything outside its project is as if it did not exist:
404 with the body an unknown name or id gets, never 403, so other
projects' names do not leak, and its lists leave it out. Every call reads
its rows through `narrowed` before it looks a name or an id up, so a row
outside the key's project and a row that does not exist are the same
lookup finding nothing. A row is created in, or moved to, a project only
through `chosen`.

Runners and maintenance are the whole install's, shared by every project:
a bound key may read them; changing them needs a global key (`needs_global`).
"""

import re
from typing import Any

from django.db.models import QuerySet
from ninja.errors import HttpError

from control.models import ApiKey
from projects import names, scoping
from projects.models import DEFAULT

# A project's name: a slug (projects.models.Project.name).
PROJECT_NAME = re.compile(r"[-a-zA-Z0-9_]{1,100}")


def bound(key: ApiKey) -> str | None:
    """The project `key` is bound to; None for a global key."""
    return key.project or None


def narrowed(key: ApiKey, rows: QuerySet[Any]) -> QuerySet[Any]:
    """`rows` as `key` sees them: a bound key, its project's only (an
    execution by its job's, a dead letter by its execution's job's)."""
    project = bound(key)
    if project is None:
        return rows
    lookup = scoping.project_lookup(rows.model)
    if lookup is None:  # a model of no project: nothing of it is a project's
        return rows.none()
    through, _, field = lookup.rpartition("__")
    if not through:
        return rows.filter(**{field: project})
    # Runs by the ids of the project's jobs, read first: the database weighs
    # them by their own statistics, so a small project's runs among
    # millions are found through their jobs, not by reading back from the
    # newest run until a page is full (bench/management_api.py).
    owners = related_model(rows.model, through)._default_manager.filter(**{field: project})
    return rows.filter(**{f"{through}__in": list(owners.values_list("pk", flat=True))})


def related_model(model: Any, path: str) -> Any:
    """The model `path` (`execution__job`) leads to from `model`."""
    for name in path.split("__"):
        model = model._meta.get_field(name).related_model
    return model


def of_project(key: ApiKey, rows: QuerySet[Any], project: str | None) -> QuerySet[Any]:
    """`narrowed(key, rows)`, and with a `?project=` filter, that project's
    only (one the key does not reach, or that does not exist, selects none)."""
    rows = narrowed(key, rows)
    if project is None:
        return rows
    return rows.filter(**{scoping.project_lookup(rows.model) or "project": project})


def reaches(key: ApiKey, project: str) -> bool:
    return bound(key) in (None, project)


def chosen(key: ApiKey, value: Any, where: str = "project") -> str:
    """The project a row is created in or moved to: `value`, or without
    one the key's own (a bound key's) else `default`. A project the key
    does not reach answers 404 as an unknown project does to it; an
    unknown one answers a global key 422. Both name the field; checked
    before anything is written."""
    if value is None:
        return bound(key) or DEFAULT
    if not isinstance(value, str):
        raise HttpError(422, f"{where}: expected the name of a project")
    if not reaches(key, value) or not known(value):
        raise HttpError(404 if bound(key) else 422, f"{where}: no project named {value!r}")
    return value


def known(project: str) -> bool:
    """Whether `project` exists; a text no project could be named (a NUL,
    which PostgreSQL refuses in a query) names none."""
    return bool(PROJECT_NAME.fullmatch(project)) and names.exists(project)


def writable(key: ApiKey) -> set[str] | None:
    """The projects `key` may write, as apply takes them
    (scheduler.apply.document): None for every project."""
    project = bound(key)
    return None if project is None else {project}


def needs_global(key: ApiKey, what: str) -> None:
    """403 for a bound key: `what` (draining a runner, setting maintenance)
    is the whole install's, every project's. Checked before anything runs."""
    if bound(key):
        raise HttpError(
            403, f"{what} needs a global key: this key is bound to project {key.project!r}"
        )
