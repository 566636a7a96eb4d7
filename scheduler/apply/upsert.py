"""How apply writes one item of any section (a calendar, a concurrency
group, a job, a channel, a rule): the row of its name as stored, or a new
one, with the item's values set and owned by the apply (core.ownership),
checked, compared with what was stored, written when it changes, and the
change recorded for the plan and the audit trail."""

import copy
from collections.abc import Callable
from typing import Any

from django.db import models

from audit.changes import masked_diff
from core.ownership import own

STORED = object()  # `upsert` reads the row by its name


def upsert(
    applier: Any,
    kind: str,
    model: type[models.Model],
    name: str,
    values: dict[str, Any],
    *,
    state: Callable[[Any], dict[str, Any]],
    write: Callable[[Any, Any, dict[str, Any] | None, dict[str, Any]], None],
    stored: Any = STORED,
    planned_state: Callable[[Any], dict[str, Any]] | None = None,
    clean: Callable[[Any], None] | None = None,
    mask: Callable[..., Any] = masked_diff,
    project: Any = None,
) -> Any:
    """The `model` row `name` with `values`, as `applier` makes it; returns it.

    `stored` is the row as read (by default read here; None: there is
    none). `state(row)` is the comparable picture of a row, and
    `planned_state(row)` of the planned one when it differs (a calendar
    with the document's periods). `clean(row)` checks it (ValidationError;
    by default `full_clean`), and `write(row, version, before, after)` plans
    or makes its write when the pictures differ; `version` is the stored
    row's `updated_at`. The stored row is never changed: the row is a copy.

    `project` is the item's own `project` (a job's may be in `values`);
    without one the row goes to the document's (`applier.project_for`). The
    applier refuses a project the caller may not write, and a stored row of
    one (ValidationError naming `project` or `name`).
    """
    if stored is STORED:
        stored = model.objects.filter(name=name).first()
    chosen = applier.project_for(values.pop("project", None) or project, stored)
    before = with_project(state(stored), stored) if stored is not None else None
    row = copy.copy(stored) if stored is not None else model(name=name)
    for key, value in values.items():
        setattr(row, key, value)
    row.project = chosen
    own(row, applier.managed_by, applier.managed_source)
    if clean is None:
        row.full_clean()
    else:
        clean(row)
    after = with_project((planned_state or state)(row), row)
    if before != after:
        write(row, stored.updated_at if stored is not None else None, before, after)
    applier.record_change(kind, name, before, after, mask=mask, target=row)
    return row


def with_project(picture: dict[str, Any], row: Any) -> dict[str, Any]:
    """A row's picture with its project: a move between projects is a change."""
    return {**picture, "project": row.project}
