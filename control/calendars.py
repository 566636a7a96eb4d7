"""Calendars through the management API (docs/design.md §8): the fields of the
apply file, checked and written by the code `manage.py apply` runs; PUT
creates or replaces. Ownership as for jobs (control.ownership), and so are
projects (control.reach): a key bound to a project reaches only its
calendars; a `project` in a PUT creates or moves the calendar there (without
one, a stored calendar stays where it is)."""

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from ninja.errors import HttpError

from calendars.models import Calendar, CalendarPeriod
from calendars.rules import CalendarRules, RulesError
from calendars.validators import text_problem
from control import ownership, paging, reach
from control.fields import checked_instant
from control.models import ApiKey
from core.ownership import ManagedBy
from scheduler.apply.document import apply_item
from scheduler.apply.items import ApplyError

# A preview is computed on request: its range is capped.
MAX_PREVIEW = timedelta(days=366)
DEFAULT_PREVIEW = timedelta(days=30)


def fields(calendar: Calendar) -> dict[str, Any]:
    """The calendar as the API shows it: the apply file's fields."""
    periods = list(calendar.periods.all())
    return {
        "name": calendar.name,
        "project": calendar.project,
        "description": calendar.description,
        "timezone": calendar.timezone,
        "weekdays": list(calendar.weekdays),
        "holidays": {
            "country": calendar.holiday_country,
            "subdivision": calendar.holiday_subdivision or None,
            "categories": list(calendar.holiday_categories),
        }
        if calendar.holiday_country
        else None,
        "daily_window": {
            "start": calendar.window_start.strftime("%H:%M"),
            "end": calendar.window_end.strftime("%H:%M"),
        }
        if calendar.window_start is not None
        else None,
        "exclude": [period(p) for p in periods if p.kind == CalendarPeriod.EXCLUDE],
        "include": [period(p) for p in periods if p.kind == CalendarPeriod.INCLUDE],
        "base": calendar.base.name if calendar.base_id else None,
        "managed_by": calendar.managed_by,
        "managed_source": calendar.managed_source,
    }


def period(row: CalendarPeriod) -> dict[str, str]:
    start, end = (row.start_date, row.end_date) if row.start_date else (row.start_at, row.end_at)
    return {"start": start.isoformat(), "end": end.isoformat(), "label": row.label}


def get(name: str, key: ApiKey) -> Calendar:
    """The calendar named `name` that `key` reaches (control.reach), or 404.
    A name with NUL names no calendar (PostgreSQL refuses it in a query)."""
    rows = reach.narrowed(key, Calendar.objects.select_related("base"))
    calendar = None if text_problem(name) else rows.filter(name=name).first()
    if calendar is None:
        raise HttpError(404, f"no calendar named {name!r}")
    return calendar


def listed(
    key: ApiKey,
    *,
    project: str | None = None,
    limit: int = paging.DEFAULT_LIMIT,
    cursor: str | None = None,
) -> tuple[list[Calendar], str | None]:
    calendars = Calendar.objects.select_related("base").prefetch_related("periods")
    return paging.page(
        reach.of_project(key, calendars, project), "name", limit=limit, cursor=cursor
    )


def put(
    name: str, item: Any, *, key: ApiKey, now: datetime, actor: object
) -> tuple[Calendar, bool]:
    """Create or replace the calendar `name`; (calendar, created). One of
    a project the key does not reach answers 404, as for a GET."""
    if not isinstance(item, dict):
        raise HttpError(422, "expected a mapping of calendar fields")
    item = dict(item)
    adopt = ownership.adopt_flag(item.pop("adopt", False))
    wanted = item.pop("project", None)
    # What GET shows may be sent back: who manages it is not for the caller to set.
    item.pop("managed_by", None)
    item.pop("managed_source", None)
    if item.setdefault("name", name) != name:
        raise HttpError(422, "name: must be the name in the path")
    if text_problem(name):  # before it is looked up
        raise HttpError(422, f"name: {text_problem(name)}")
    with transaction.atomic():
        calendar = Calendar.objects.select_for_update().filter(name=name).first()
        if calendar is not None and not reach.reaches(key, calendar.project):
            raise HttpError(404, f"no calendar named {name!r}")
        if wanted is None and calendar is not None:
            project = calendar.project
        else:
            project = reach.chosen(key, wanted)
        adopted = calendar is not None and ownership.check(calendar, adopt)
        try:
            apply_item(
                "calendar",
                {**item, "project": project},
                now=now,
                actor=actor,
                managed_by=ManagedBy.API,
                via="api",
                projects=reach.writable(key),
            )
        except ApplyError as e:
            raise HttpError(422, "; ".join(e.errors)) from None
        if adopted:
            ownership.record_adopted(calendar, now=now, actor=actor)
    return get(name, key), calendar is None


def preview(
    name: str, *, key: ApiKey, start: datetime, end: datetime | None = None
) -> list[tuple[datetime, datetime]]:
    """[(start, end)]: the allowed stretches within [start, end), cut at both
    ends; without `end`, DEFAULT_PREVIEW from start. Bare instants are read
    on the calendar's clock."""
    calendar = get(name, key)
    start = checked_instant("start", start, calendar.timezone)
    # Checked first: a start near the end of time has no end a preview away.
    end = checked_instant("end", start + DEFAULT_PREVIEW if end is None else end, calendar.timezone)
    if end <= start:
        raise HttpError(422, "end: must be after start")
    if end - start > MAX_PREVIEW:
        raise HttpError(422, f"end: at most {MAX_PREVIEW.days} days after start")
    try:
        rules = calendar.rules()
        return stretches(rules, start, end)
    except (RulesError, ValueError) as e:
        raise HttpError(422, f"calendar {name}: {e}") from None


def stretches(
    rules: CalendarRules, start: datetime, end: datetime
) -> list[tuple[datetime, datetime]]:
    found = []
    t = rules.next_allowed(start, horizon=end)
    while t is not None and t < end:
        until = rules.allowed_until(t, horizon=end)
        until = end if until is None or until > end else until
        found.append((t, until))
        t = rules.next_allowed(until, horizon=end)
    return found
