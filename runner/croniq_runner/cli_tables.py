"""How the `croniq` CLI shows the API's answers to a person: tables of
lists, `field: value` lines of one item, the plan of an apply. `--json`
bypasses all of this and prints the API's JSON as it is."""

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

# One item of a list the API answers, as its JSON object.
Item = dict[str, Any]
# (heading, field or function of the item) of a list's column.
Column = tuple[str, str | Callable[[Item], Any]]

# (heading, field or function of the item) of each list's columns.
JOB_COLUMNS: list[Column] = [
    ("NAME", "name"),
    ("PROJECT", "project"),
    ("SCHEDULE", "schedule"),
    ("TIMEZONE", "timezone"),
    ("NEXT RUN", lambda job: when(job.get("next_run_at"))),
    ("STATUS", lambda job: job_status(job)),
    ("LABELS", lambda job: ",".join(job.get("labels") or [])),
    ("MANAGED BY", "managed_by"),
]
EXECUTION_COLUMNS: list[Column] = [
    ("ID", "id"),
    ("JOB", "job"),
    ("STATE", "state"),
    ("TRIGGER", "trigger"),
    ("ATTEMPT", "attempt"),
    ("SCHEDULED FOR", lambda e: when(e.get("scheduled_for"))),
    ("RUNNER", "runner"),
    ("EXIT", "exit_code"),
]
RUNNER_COLUMNS: list[Column] = [
    ("ID", "id"),
    ("NAME", "name"),
    ("STATE", lambda r: runner_status(r)),
    ("LABELS", lambda r: ",".join(r.get("labels") or [])),
    ("RUNNING", lambda r: f"{r.get('running', 0)}/{r.get('capacity', '?')}"),
    ("VERSION", "version"),
    ("LAST SEEN", lambda r: when(r.get("last_seen_at"))),
]

SECRET_COLUMNS: list[Column] = [
    ("NAME", "name"),
    ("PROJECT", "project"),
    ("CREATED", lambda s: when(s.get("created_at"))),
    ("UPDATED", lambda s: when(s.get("updated_at"))),
]


def when(value: Any) -> str:
    """An ISO 8601 instant of the API as UTC to the second: "2026-12-01
    23:40:05Z"; anything else as it is."""
    if not value:
        return ""
    try:
        instant = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return str(value)
    if instant.tzinfo is None:
        return instant.strftime("%Y-%m-%d %H:%M:%S")
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def job_status(job: Item) -> str:
    if job.get("paused"):
        until = job.get("paused_until")
        return f"paused until {when(until)}" if until else "paused"
    return "enabled" if job.get("enabled", True) else "disabled"


def runner_status(runner: Item) -> str:
    words = [runner.get("state", "")]
    if runner.get("drained") and runner.get("state") != "draining":
        words.append("drained")
    if runner.get("flapping"):
        words.append("flapping")
    return ", ".join(word for word in words if word)


def cell(item: Item, column: str | Callable[[Item], Any]) -> str:
    value = column(item) if callable(column) else item.get(column)
    return "" if value is None else str(value).replace("\n", " ")


def table(items: Iterable[Item], columns: list[Column]) -> str:
    """Rows under headings, columns as wide as their widest cell."""
    rows = [[heading for heading, _ in columns]]
    rows += [[cell(item, column) for _, column in columns] for item in items]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def fields(item: Item) -> str:
    """One item as `field: value` lines, in the API's order."""
    width = max((len(key) for key in item), default=0)
    return "\n".join(f"{key + ':':<{width + 1}} {shown(value)}" for key, value in item.items())


def shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


SIGNS = {"create": "+", "update": "~", "delete": "-", "unchanged": "="}


def plan(answer: Item) -> str:
    """The plan of an apply as `manage.py apply` prints it: one line per
    change, then what was (or would be) done."""
    changes = answer.get("changes") or []
    lines = []
    for change in changes:
        line = f"{SIGNS.get(change['action'], '?')} {change['kind']} {change['name']}"
        if change["action"] == "update":
            line += ": " + ", ".join(sorted(change.get("diff") or {}))
        lines.append(line)
    if not changes:
        lines.append("nothing to change: everything is as the file says")
    else:
        prefix = "applied" if answer.get("applied") else "would apply"
        lines.append(f"{prefix} {len(changes)} change(s)")
    return "\n".join(lines)
