"""An audit event's data as the audit page shows it: a change as one
"field: old → new" line per field, anything else as a compact key: value list.

Two shapes hold changes (audit/changes.py): an admin save's data *is* the
diff, `{"field": [old, new]}`, under an action ending in `.created`,
`.changed` or `.deleted`; apply and the API put it under `"diff"` beside
facts such as `name` and `via`. Values are shown as stored: secrets were
masked when the event was written, and the diff's masking is applied again
here so that no event written before a field was known to be secret shows
its value (masking a masked value leaves it masked).
"""

import json
from dataclasses import dataclass
from typing import Any

from audit.changes import masked_sides

CHANGE_VERBS = (".created", ".changed", ".deleted")
# Longer values are cut: the page lists fifty events, and a job's whole
# env or request would push the rest off the screen.
MAX_VALUE_CHARS = 200
ABSENT = "—"


@dataclass(frozen=True)
class FieldChange:
    field: str
    old: str
    new: str


@dataclass(frozen=True)
class Details:
    changes: list[FieldChange]
    facts: list[tuple[str, str]]

    def __bool__(self) -> bool:
        return bool(self.changes or self.facts)


def shown_value(value: Any) -> str:
    """A value in one short line: text as it is, the rest as compact JSON."""
    if value is None:
        return ABSENT
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    if len(text) > MAX_VALUE_CHARS:
        return text[: MAX_VALUE_CHARS - 1] + "…"
    return text


def is_diff(value: Any) -> bool:
    """`{"field": [old, new], ...}`, at least one field."""
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(sides, list) and len(sides) == 2 for sides in value.values())
    )


def field_changes(diff: dict[str, list[Any]]) -> list[FieldChange]:
    return [
        FieldChange(name, *(shown_value(side) for side in masked_sides(name, sides)))
        for name, sides in sorted(diff.items())
    ]


def details(action: str, data: Any) -> Details:
    """What an event's `data` says, for the audit page."""
    if not isinstance(data, dict):
        return Details([], [("data", shown_value(data))] if data not in (None, "") else [])
    if action.endswith(CHANGE_VERBS) and is_diff(data):
        return Details(field_changes(data), [])
    diff = data.get("diff")
    if isinstance(diff, dict) and is_diff(diff):
        rest = {key: value for key, value in data.items() if key != "diff"}
        return Details(field_changes(diff), facts(rest))
    return Details([], facts(data))


def facts(data: dict[str, Any]) -> list[tuple[str, str]]:
    """key: value, each value masked as a diff's side would be."""
    return [
        (key, shown_value(masked_sides(key, [value])[0])) for key, value in sorted(data.items())
    ]
