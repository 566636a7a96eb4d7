"""docs/apply.md, the apply file's field reference, written from the field
lists apply checks items against (`manage.py apply_reference`), so the
reference cannot drift from what apply accepts; a test compares them.

The sections apps add (`scheduler.apply.sections.add_sections`) are described by their
factory's `FIELDS` ({section key: fields}).
"""

from collections.abc import Iterator

import yaml

from scheduler.apply.fields import (
    CALENDAR_FIELDS,
    GROUP_FIELDS,
    JOB_FIELDS,
    PROJECT_FIELDS,
    REQUIRED,
    Field,
)
from scheduler.apply.sections import added_sections

HEADER = """\
# The apply file: field reference

<!-- Written by `croniq-admin apply_reference > docs/apply.md`, from the field
lists `apply` validates with; tests/scheduler/test_apply_reference.py fails
when this file and the generated text differ. -->

`croniq-admin apply FILE` (or `POST /api/v1/apply`) reads a YAML or JSON
mapping of these sections, each a list of items; an item is a mapping of the
fields below, and any other field is refused. The management API's job and
calendar calls take the same fields. A field inside a mapping is written
`holidays.country`; a field of each item of a list, `exclude[].start`.
Errors name the item and the field as the file writes them
(`calendars[0].holidays.country: ...`).

Durations are whole seconds (`900`) or `@every`'s texts (`45s`, `30m`,
`1h30m`, `2d`); secret references are `file:/run/secrets/NAME` (a file
under CRONIQ_SECRETS_DIR) or `${CRONIQ_SECRET_NAME}`.

A document is YAML without anchors or aliases (`&name`, `*name`: write the
value out), or JSON; at most 2.5 MB, with at most 5,000 jobs, 1,000
calendars, 1,000 concurrency groups and 1,000 items of any other section.

Projects (docs/design.md §11): a top-level `project: NAME` puts every item
of the document in that project (default: `default`); an item's own
`project` field, which every section's items accept, wins over it. A
project must exist or be declared in the document's `projects:` section
(which only a global key or a superuser may write). A caller bound to
projects (a key bound to one, a project editor) is refused the whole
document when an item, or the stored row of an item's name, is elsewhere;
its `--prune` never deletes another project's rows.
"""

BUILT_IN = {
    "projects": PROJECT_FIELDS,
    "calendars": CALENDAR_FIELDS,
    "concurrency_groups": GROUP_FIELDS,
    "jobs": JOB_FIELDS,
}


def sections() -> list[tuple[str, tuple[Field, ...] | None]]:
    """[(section key, fields or None)] in the order apply applies them."""
    found = list(BUILT_IN.items())
    for keys, factory in added_sections():
        described = getattr(factory, "FIELDS", {})
        found += [(key, described.get(key)) for key in keys]
    return found


def reference() -> str:
    """The text of docs/apply.md."""
    parts = [HEADER]
    for key, fields in sections():
        parts.append(section(key, fields))
    return "\n".join(parts)


def section(key: str, fields: tuple[Field, ...] | None) -> str:
    lines = [f"## `{key}:`", ""]
    if fields is None:
        return "\n".join([*lines, "Not described.", ""])
    lines += ["| field | value | default | meaning |", "| --- | --- | --- | --- |"]
    lines += [row(path, field) for path, field in flattened(fields)]
    return "\n".join([*lines, ""])


def flattened(fields: tuple[Field, ...], prefix: str = "") -> Iterator[tuple[str, Field]]:
    """(path, field) of every field, each nested one after its parent."""
    for field in fields:
        path = f"{prefix}{field.name}"
        yield path, field
        inner = f"{path}[]." if field.kind.startswith("list") else f"{path}."
        yield from flattened(field.fields, inner)


def row(path: str, field: Field) -> str:
    cells = [f"`{path}`", field.kind, default_text(field.default), field.meaning]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def default_text(default: object) -> str:
    if default is REQUIRED:
        return "**required**"
    if default is None:
        return "none"
    if default == "":
        return '`""`'
    flow = yaml.safe_dump(default, default_flow_style=True, width=1000)
    return f"`{flow.strip().removesuffix('...').strip()}`"
