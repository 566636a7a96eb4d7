"""Input types of the management API's calls: values the database can hold,
so bad input is a 422 naming the field, never a 500 from the database."""

from datetime import UTC, datetime
from typing import Annotated

from ninja import Path
from ninja.errors import HttpError
from pydantic import AfterValidator, AwareDatetime, Field

from runners.api import Text

ID_MAX = 2**63 - 1
# Far enough apart for any schedule, near enough that converting to UTC
# (or a step of a microsecond) never leaves the range datetime can hold.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)


def within_range(value):
    """The instant in UTC: PostgreSQL refuses offsets past 15:59 that Python
    accepts (+16:00 was a 500), and the instant is the same."""
    if not EARLIEST <= value <= LATEST:
        raise ValueError("must lie between the years 1970 and 9000")
    return value.astimezone(UTC)


def checked_instant(where, value):
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
