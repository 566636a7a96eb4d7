"""Input types of the management API's calls: values the database can hold,
so bad input is a 422 naming the field, never a 500 from the database.

An instant may come with its offset (`2026-12-08T09:00:00+01:00`, `...Z`)
or bare: a date (`2026-12-08`, its midnight) or a date and time
(`2026-12-08T09:00`). A bare one is read on the clock the call is about: a
job's timezone for a job's calls (pause, next, trigger, backfill), a
calendar's for its preview, UTC for every other call (`Instant`). Answers
always carry the offset.
"""

from datetime import UTC, datetime
from typing import Annotated

from ninja import Path
from ninja.errors import HttpError
from pydantic import AfterValidator, Field

from calendars.periods import RANGE_PROBLEM, out_of_range
from calendars.zones import RulesError, get_zone, resolve_wall
from core.text import Text

ID_MAX = 2**63 - 1


def is_bare(value: datetime) -> bool:
    """No offset: a wall time, not yet an instant."""
    return value.tzinfo is None or value.utcoffset() is None


def within_range(value: datetime) -> datetime:
    """The instant in UTC: PostgreSQL refuses offsets past 15:59 that Python
    accepts (+16:00 was a 500), and the instant is the same."""
    if out_of_range(value):
        raise ValueError(RANGE_PROBLEM)
    return value.astimezone(UTC)


def read_in_utc(value: datetime) -> datetime:
    """A call with no clock of its own reads a bare instant in UTC."""
    return within_range(value.replace(tzinfo=UTC) if is_bare(value) else value)


def kept_bare(value: datetime) -> datetime:
    """An instant in UTC, or a bare one as it is, its date in range, for
    the call to read on its clock (`checked_instant`) once it knows it."""
    if not is_bare(value):
        return within_range(value)
    if out_of_range(value.date()):
        raise ValueError(RANGE_PROBLEM)
    return value


def on_clock(value: datetime, zone: str) -> datetime:
    """A bare `value` read on the wall clock of `zone`, as a schedule is
    (docs/design.md §3): a wall time that occurs twice (the hour the clocks
    go back) is its first occurrence; one that does not occur (the hour
    they skip) is the end of the gap, where the clocks resume: `02:30` in
    Europe/Berlin on the last Sunday of March is 03:00 CEST. Calendar dates
    start their day the same way (calendars.zones.local_midnight)."""
    return resolve_wall(get_zone(zone), value)


def checked_instant(where: str, value: datetime, zone: str = "UTC") -> datetime:
    """`value` in UTC, a bare one read in `zone` (a job's or a calendar's
    timezone), or a 422 naming `where`: for instants a call reads itself."""
    if is_bare(value):
        if out_of_range(value.date()):
            raise HttpError(422, f"{where}: {RANGE_PROBLEM}")
        try:
            value = on_clock(value, zone)
        except RulesError:
            # A zone stored before it left the tz database: no clock to read on.
            raise HttpError(
                422, f"{where}: needs an offset, e.g. +01:00 or Z ({zone!r} is no known timezone)"
            ) from None
    try:
        return within_range(value)
    except ValueError as e:
        raise HttpError(422, f"{where}: {e}") from None


# An instant of a call with no clock of its own: bare, it is read in UTC.
Instant = Annotated[datetime, AfterValidator(read_in_utc)]
# An instant a job's call reads on the job's clock when bare: the call
# passes it through `checked_instant` with the job's timezone.
LocalInstant = Annotated[datetime, AfterValidator(kept_bare)]
RowId = Annotated[int, Path(ge=1, le=ID_MAX)]
Name = Annotated[Text(1, 200), Field(description="A name (a job's, a key's)")]
