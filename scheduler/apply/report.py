"""What an apply changes, as it answers it: a Change per item (the text
plan, `--json`, the API) and its audit event's data."""

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class Change:
    action: str  # create, update, delete, unchanged
    kind: str  # calendar, job
    name: str
    diff: dict = field(default_factory=dict)
    # The row created, updated or deleted: the audit event's target.
    target: object = field(default=None, repr=False, compare=False)
    # A job whose schedule changed: {"before": [...], "after": [...]}, its
    # next PLANNED_FIRES fire instants as they were and as they will be.
    fires: dict = field(default_factory=dict)

    def __str__(self):
        signs = {"create": "+", "update": "~", "delete": "-", "unchanged": "="}
        text = f"{signs[self.action]} {self.kind} {self.name}"
        if self.action == "update":
            text += ": " + ", ".join(sorted(self.diff))
        return text

    def details(self) -> list[str]:
        """Lines under the summary of an update: each changed field, old ->
        new, and for a schedule change the fire times before and after."""
        if self.action != "update":
            return []
        lines = [
            f"    {name}: {shown(old)} -> {shown(new)}"
            for name, (old, new) in sorted(self.diff.items())
        ]
        for when in ("before", "after"):
            if when in self.fires:
                instants = ", ".join(shown_instant(i) for i in self.fires[when]) or "none"
                lines.append(f"    next fires {when}: {instants}")
        return lines


def shown(value: object) -> str:
    """A field's value in the text plan: JSON, as `--json` writes it."""
    return json.dumps(value, default=str, ensure_ascii=False)


def shown_instant(instant: datetime | None) -> str:
    return instant.strftime("%Y-%m-%d %H:%M %Z") if instant is not None else "unknown"


def plan(changes: list[Change]) -> list[dict[str, Any]]:
    """What apply reports (`--json`, the API): the changes that change
    something, as JSON-friendly rows."""
    return [
        {
            "action": c.action,
            "kind": c.kind,
            "name": c.name,
            "diff": c.diff,
            "fires": c.fires or None,
        }
        for c in changes
        if c.action != "unchanged"
    ]
