"""`/api/v1/calendars`: list, read, create or replace, and preview the
allowed time of calendars, addressed by name (docs/design.md §8). The rules are
in control.calendars."""

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Body, Router, Schema

from control import auth, calendars, examples, paging, scopes
from core.text import Text

router = Router(tags=["calendars"])


class HolidaysOut(Schema):
    country: str
    subdivision: str | None
    categories: list[str]


class WindowOut(Schema):
    start: str
    end: str


class PeriodOut(Schema):
    start: str
    end: str
    label: str


class CalendarOut(Schema):
    name: str
    project: str
    description: str
    timezone: str
    weekdays: list[str]
    holidays: HolidaysOut | None
    daily_window: WindowOut | None
    exclude: list[PeriodOut]
    include: list[PeriodOut]
    base: str | None
    managed_by: str
    managed_source: str = ""


class CalendarPage(Schema):
    items: list[CalendarOut]
    next_cursor: str | None


class Stretch(Schema):
    start: datetime
    end: datetime


class PreviewOut(Schema):
    allowed: list[Stretch]


@router.get("calendars", response=CalendarPage, auth=auth.needs(scopes.CALENDARS_READ))
def list_calendars(
    request: HttpRequest,
    limit: int = paging.DEFAULT_LIMIT,
    cursor: str | None = None,
    project: Text(0, 100) | None = None,
) -> dict[str, Any]:
    rows, next_cursor = calendars.listed(request.auth, project=project, limit=limit, cursor=cursor)
    return {"items": [calendars.fields(c) for c in rows], "next_cursor": next_cursor}


@router.get("calendars/{name}", response=CalendarOut, auth=auth.needs(scopes.CALENDARS_READ))
def get_calendar(request: HttpRequest, name: str) -> dict[str, Any]:
    return calendars.fields(calendars.get(name, request.auth))


@router.put(
    "calendars/{name}",
    response=CalendarOut,
    auth=auth.needs(scopes.CALENDARS_WRITE),
    openapi_extra=examples.body(examples.CALENDAR),
)
def put_calendar(request: HttpRequest, name: str, item: Body[dict[str, Any]]) -> dict[str, Any]:
    now, actor = timezone.now(), auth.actor(request.auth)
    calendar, _ = calendars.put(name, item, key=request.auth, now=now, actor=actor)
    return calendars.fields(calendar)


@router.get("calendars/{name}/preview", response=PreviewOut, auth=auth.needs(scopes.CALENDARS_READ))
def preview(
    request: HttpRequest, name: str, start: datetime | None = None, end: datetime | None = None
) -> dict[str, Any]:
    found = calendars.preview(name, key=request.auth, start=start or timezone.now(), end=end)
    return {"allowed": [{"start": s, "end": e} for s, e in found]}
