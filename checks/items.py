"""A check as an item (docs/design.md §12): the fields the management API
takes and answers, checked here once with errors that name the field
("period: ...", "schedule: ..."), and written with the state machine's
deadlines kept right (`states.retimed`, `states.paused`).

Durations (`period`, `grace`) are whole seconds (`3600`) or texts in
`@every`'s grammar (`"1h"`, `"90s"`), as elsewhere in apply files.
"""

from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug

from calendars.validators import text_problems, validate_timezone
from checks import states
from checks.models import LONGEST, Check
from projects import names as project_names
from scheduler.apply.items import ApplyError, seconds, string_list

KEYS = ("name", "project", "description", "labels", "schedule", "timezone", "period", "grace")
TIMING = ("schedule", "timezone", "period", "grace")
# A check given no project belongs to the default one (docs/design.md §11).
PROJECT = "default"


def ping_url(check: Check) -> str:
    return f"{settings.CRONIQ_PUBLIC_URL}/ping/{check.token}"


def fields(check: Check) -> dict[str, Any]:
    """The check as the API shows it."""
    return {
        "name": check.name,
        "project": check.project,
        "description": check.description,
        "labels": list(check.labels),
        "schedule": check.schedule or None,
        "timezone": check.timezone,
        "period": check.period,
        "grace": check.grace,
        "ping_url": ping_url(check),
        "state": check.state,
        "last_ping_at": check.last_ping_at,
        "next_expected_at": check.next_expected_at,
        "managed_by": check.managed_by,
        "managed_source": check.managed_source,
    }


def stored(check: Check) -> dict[str, Any]:
    """The item's fields as the row holds them (a PATCH starts from these)."""
    return {key: value for key, value in fields(check).items() if key in KEYS}


def values(item: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The Check field values of `item` (a schedule must come after `now`);
    ApplyError naming every bad field."""
    errors = [f"{key}: unknown field" for key in item if key not in KEYS]
    errors += [f"{where}: {problem}" for where, problem in text_problems(item)]
    if errors:
        raise ApplyError(errors)
    found: dict[str, Any] = {}
    for key, check in CHECKS.items():
        try:
            found[key] = check(key, item.get(key))
        except ApplyError as e:
            errors += e.errors
    if not errors:
        errors = timing_problems(found, now)
    if errors:
        raise ApplyError(errors)
    return found


def name(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ApplyError(f"{where}: required: letters, digits, - and _")
    try:
        validate_slug(value)
    except ValidationError:
        raise ApplyError(f"{where}: {value!r} is not a name: letters, digits, - and _") from None
    if len(value) > 100:
        raise ApplyError(f"{where}: at most 100 characters")
    return value


def project(where: str, value: Any) -> str:
    """The name of a project that exists (whether the caller may write it is
    the caller's to check: apply's upsert, the API)."""
    if value is None:
        return PROJECT
    value = name(where, value)
    if not project_names.exists(value):
        raise ApplyError(f"{where}: no project named {value!r}")
    return value


def text(where: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ApplyError(f"{where}: expected text, got {value!r}")
    return value


def labels(where: str, value: Any) -> list[str]:
    return [] if value is None else list(dict.fromkeys(string_list(where, value)))


def schedule(where: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise ApplyError(f'{where}: expected cron text or a macro, e.g. "30 2 * * *"')
    return " ".join(value.split())


def timezone_name(where: str, value: Any) -> str:
    if value is None:
        return "UTC"
    try:
        validate_timezone(value)
    except (ValidationError, TypeError):
        raise ApplyError(f"{where}: {value!r} is not a known IANA timezone") from None
    return str(value)


def period(where: str, value: Any) -> int | None:
    return None if value is None else duration(where, value, least=1)


def grace(where: str, value: Any) -> int:
    return 60 if value is None else duration(where, value, least=0)


def duration(where: str, value: Any, least: int) -> int:
    found = seconds(where, value, least=least)
    if found > LONGEST:
        raise ApplyError(f"{where}: at most {LONGEST} seconds (a year)")
    return found


CHECKS = {
    "name": name,
    "project": project,
    "description": text,
    "labels": labels,
    "schedule": schedule,
    "timezone": timezone_name,
    "period": period,
    "grace": grace,
}


def timing_problems(found: dict[str, Any], now: datetime) -> list[str]:
    if bool(found["schedule"]) == (found["period"] is not None):
        return ["schedule: give either a schedule (cron or a macro) or a period, not both"]
    if found["schedule"]:
        problem = states.schedule_problem(found["schedule"], found["timezone"], found["name"], now)
        if problem:
            return [f"schedule: {problem}"]
    return []


def write(check: Check, found: dict[str, Any], *, paused: bool | None = None) -> list[str]:
    """Set `found` (from `values`) on `check` and keep its deadlines right
    under the new timing; `paused` True pauses it, False resumes it (it
    waits for its next ping, as a new check). Returns the fields changed."""
    before = {key: getattr(check, key) for key in KEYS}
    for key, value in found.items():
        setattr(check, key, value)
    changed = [key for key in KEYS if getattr(check, key) != before[key]]
    if any(key in changed for key in TIMING):
        check.set_status(states.retimed(check.timing(), check.status()))
    if paused and check.state != states.PAUSED:
        check.set_status(states.paused(check.status()))
        changed.append("paused")
    elif paused is False and check.state == states.PAUSED:
        check.state = states.NEW
        changed.append("paused")
    return changed


def create(found: dict[str, Any], *, managed_by: str) -> Check:
    """A new check of `found`, never pinged (`new`: its first ping sets its
    deadlines)."""
    check = Check(managed_by=managed_by)
    write(check, found)
    check.save()
    return check
