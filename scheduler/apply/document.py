"""Jobs and calendars as code: `manage.py apply FILE` (docs/design.md §5).

The whole file is validated, reading only, and then applied in one short
transaction: a bad item means nothing is written, and errors name the item
and field ("jobs[3].schedule: ..."). Applying the same file twice changes
nothing. Documents are bounded (MAX_DOCUMENT_CHARS, MAX_ITEMS) and YAML
anchors and aliases are refused.

Apps above the scheduler add top-level sections of their own (the
notifications app: `channels` and `notify`, docs/design.md §9) with
`add_sections`, so the scheduler reads them without importing those apps,
and their items are applied in the same transaction as jobs and calendars.
"""

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.db import transaction

from core.ownership import Owned
from scheduler.apply.fields import CALENDAR_KEYS, JOB_KEYS
from scheduler.apply.items import (
    ApplyError,
    describe_errors,
    item_errors,
    item_problem,
    quoted,
    relative_errors,
)
from scheduler.apply.report import Change, plan
from scheduler.apply.sections import add_sections, added_sections, section_keys
from scheduler.apply.writing import Applier, Conflict

# What callers of apply import from here.
__all__ = [
    "AliasRefused",
    "Applier",
    "ApplyError",
    "Change",
    "Conflict",
    "add_sections",
    "added_sections",
    "apply",
    "apply_item",
    "check_document",
    "describe_errors",
    "load",
    "parse",
    "plan",
    "source_name",
]

# The largest document read, in characters (a file: in bytes), as a file
# or over HTTP (the API's body limit, Django's DATA_UPLOAD_MAX_MEMORY_SIZE,
# is the same 2.5 MB): a bound on the work and memory one apply takes.
MAX_DOCUMENT_CHARS = 2_621_440
# Items one document may hold, per section (any other: MAX_OTHER_ITEMS): a
# bound on the time an apply takes, its plan and its one write transaction.
MAX_ITEMS = {"jobs": 5_000, "calendars": 1_000, "concurrency_groups": 1_000}
MAX_OTHER_ITEMS = 1_000
# The safe loader, in C when PyYAML was built with libyaml.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Plans made again when rows they read changed before they were written.
PLAN_ATTEMPTS = 3


def source_name(text: str, where: str = "source") -> str:
    """The name an apply manages its jobs and calendars under (`--source`,
    by default the file's stem); ApplyError when it cannot be one."""
    limit = Owned._meta.get_field("managed_source").max_length
    if not isinstance(text, str) or not text.strip():
        raise ApplyError(f"{where}: required: a name for the file, e.g. its stem")
    if len(text) > limit or not text.isprintable():
        raise ApplyError(f"{where}: at most {limit} printable characters, got {quoted(text)}")
    return text


def load(path: str | Path) -> dict[str, Any]:
    """The document in FILE (YAML or JSON), or ApplyError with a clear message."""
    try:
        size = Path(path).stat().st_size
        if size > MAX_DOCUMENT_CHARS:  # not read at all: a bound on memory too
            raise ApplyError(f"{path}: too large: {size:,} bytes, at most {MAX_DOCUMENT_CHARS:,}")
        text = Path(path).read_text()
    except OSError as e:
        raise ApplyError(f"{path}: cannot read: {e.strerror}") from None
    return parse(text, "JSON" if str(path).endswith(".json") else "YAML", where=f"{path}: ")


def parse(text: str, syntax: str, where: str = "") -> dict[str, Any]:
    """The document in `text` ("YAML" or "JSON" `syntax`), checked as `load`
    checks a file's (the API's YAML body is read here too), or ApplyError."""
    if len(text) > MAX_DOCUMENT_CHARS:
        raise ApplyError(
            f"{where}document too large: {len(text):,} characters, at most {MAX_DOCUMENT_CHARS:,}"
        )
    try:
        document = json.loads(text) if syntax == "JSON" else yaml_document(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise ApplyError(f"{where}not valid {syntax}: {e}") from None
    except RecursionError:
        raise ApplyError(f"{where}not valid {syntax}: nested too deeply") from None
    return check_document(document, where=where)


def yaml_document(text: str) -> Any:
    """The YAML document in `text`, read without anchors and aliases: an
    alias is expanded by the loader, so a few hundred bytes of nested
    aliases ("billion laughs") become gigabytes. The events are scanned
    first (at the C parser's speed when libyaml is there), so a document
    holding one is refused before anything is built from it."""
    for event in yaml.parse(text, Loader=YAML_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            mark = event.start_mark
            kind = "an alias" if isinstance(event, yaml.AliasEvent) else "an anchor"
            raise AliasRefused(
                f"{kind} at line {mark.line + 1}, column {mark.column + 1}: anchors and "
                "aliases (&name, *name) are not accepted, write the value out"
            )
    return yaml.load(text, Loader=YAML_LOADER)  # noqa: S506 (a safe loader)


class AliasRefused(yaml.YAMLError):
    pass


def check_document(document: Any, where: str = "") -> dict[str, Any]:
    """The document if its shape is right (a mapping of known sections, each
    a list), else ApplyError; the items are checked when applied."""
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ApplyError(f"{where}expected a mapping with 'calendars' and 'jobs'")
    # `project:` (a name) puts the document's items in a project (docs/design.md §11).
    unknown = set(document) - set(section_keys()) - {"project"}
    if unknown:
        raise ApplyError(f"{where}unknown top-level key(s): {', '.join(sorted(unknown))}")
    for key in section_keys():
        items = document.get(key) or []
        if not isinstance(items, list):
            raise ApplyError(f"{key}: expected a list")
        limit = MAX_ITEMS.get(key, MAX_OTHER_ITEMS)
        if len(items) > limit:
            raise ApplyError(f"{key}: at most {limit:,} items in one document, got {len(items):,}")
    return document


def apply(
    document: dict[str, Any],
    *,
    now: datetime,
    prune: bool = False,
    dry_run: bool = False,
    actor: object = ("user", "apply"),
    source: str = "",
    managed_source: str = "",
    projects: set[str] | None = None,
) -> list[Change]:
    """Apply the document; returns the list of Changes. Raises ApplyError.

    The jobs and calendars it writes are marked as managed by
    `managed_source` (the file's name), and `prune` deletes only those of
    that source the document no longer lists: several files each manage
    their own. `source` is what the audit events say the document came from.
    `projects` are those the caller may write (a key bound to one, a project
    editor): an item of any other, or a stored row of one, refuses the
    whole document; None: every project.

    Every item is checked and the plan made first, reading only (on SQLite
    a write transaction holds the database's write lock, and every tick,
    heartbeat and finish waits behind it); then one short transaction
    writes what changes. A row another writer changed between the two is
    never overwritten: the plan is made again (at most PLAN_ATTEMPTS times).
    """
    for _attempt in range(PLAN_ATTEMPTS):
        applier = Applier(
            now=now,
            actor=actor,
            source=source,
            managed_source=managed_source,
            projects=projects,
        )
        applier.plan(document)
        if applier.errors:
            # Refused before any write: the write lock is never taken for it.
            raise ApplyError(applier.errors)
        try:
            return applier.write(document, prune=prune, dry_run=dry_run)
        except Conflict:
            continue
    raise ApplyError(
        f"nothing applied: rows this document changes were changed by someone else "
        f"{PLAN_ATTEMPTS} times while it was applied; apply it again"
    )


def apply_item(
    kind: str,
    item: dict[str, Any],
    *,
    now: datetime,
    actor: object,
    managed_by: Any,
    via: str,
    source: str = "",
    projects: set[str] | None = None,
) -> Change:
    """Check and write one job or calendar (`kind`) as apply would, marked
    `managed_by`; returns its Change. ApplyError names the field
    ("schedule: ..."). The management API's writes: one item, no file.
    `projects`: those the caller may write (a key bound to one); None: all."""
    problem = item_problem(
        "", item, {"job": JOB_KEYS, "calendar": CALENDAR_KEYS}[kind] | {"project"}
    )
    if problem:
        raise ApplyError(relative_errors([problem]))
    applier = Applier(
        now=now, actor=actor, source=source, managed_by=managed_by, via=via, projects=projects
    )
    plan_item = applier.apply_job if kind == "job" else applier.apply_calendar
    # One row: planned and written in one transaction, which reads it again.
    with transaction.atomic():
        try:
            plan_item("", item)
        except (ValidationError, ApplyError) as e:
            raise ApplyError(item_errors(e)) from None
        applier.write_rows()
        applier.check_chains()
        if applier.errors:
            raise ApplyError(relative_errors(applier.errors))
        applier.reschedule()
        applier.audit()
    return applier.changes[-1]
