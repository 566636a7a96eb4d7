"""Input types of the management API's calls: values the database can hold,
so bad input is a 422 naming the field, never a 500 from the database."""

from datetime import UTC, datetime
from typing import Annotated

from ninja import Path
from ninja.errors import HttpError
from pydantic import AfterValidator, AwareDatetime, Field

from calendars.periods import RANGE_PROBLEM, out_of_range
from core.text import Text

ID_MAX = 2**63 - 1


def within_range(value: datetime) -> datetime:
    """The instant in UTC: PostgreSQL refuses offsets past 15:59 that Python
    accepts (+16:00 was a 500), and the instant is the same."""
    if out_of_range(value):
        raise ValueError(RANGE_PROBLEM)
    return value.astimezone(UTC)


def checked_instant(where: str, value: datetime) -> datetime:
    """`value` in UTC, or a 422 naming `where`: for instants a call reads
    itself (an optional body or query field with its own messages)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise HttpError(422, f"{where}: needs an offset, e.g. +01:00 or Z")
    try:
        return within_range(value)
    except ValueError as e:
        raise HttpError(422, f"{where}: {e}") from None


Instant = Annotated[AwareDatetime, AfterValidator(within_range)]
RowId = Annotated[int, Path(ge=1, le=ID_MAX)]
Name = Annotated[Text(1, 200), Field(description="A name (a job's, a key's)")]
