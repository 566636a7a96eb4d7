"""Blackout and include periods, and the merged UTC intervals they make."""

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, tzinfo
from typing import cast

from calendars.zones import ONE_DAY, RulesError, local_midnight, to_utc

# The instants and dates people may give (periods here, instants in the
# management API): far enough apart for any schedule, near enough that
# converting to UTC or another zone, a day past a period's end, or a
# schedule's horizon never leaves the range datetime can hold.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
RANGE_PROBLEM = "must lie between the years 1970 and 9000"


def out_of_range(value: date) -> bool:
    """Whether a date or a datetime lies outside [EARLIEST, LATEST]; a
    naive datetime is left to the checks that ask for an offset."""
    if isinstance(value, datetime):
        return value.tzinfo is not None and not EARLIEST <= value <= LATEST
    return not EARLIEST.date() <= value <= LATEST.date()


@dataclass(frozen=True)
class Period:
    """A date range (end inclusive, whole local days) or an instant range (end exclusive)."""

    start: date
    end: date
    label: str = ""

    def __post_init__(self) -> None:
        start, end = self.start, self.end
        is_dt = [isinstance(v, datetime) for v in (start, end)]
        if is_dt[0] != is_dt[1]:
            raise RulesError("a period is two dates or two datetimes, not one of each")
        if (
            isinstance(start, datetime)
            and isinstance(end, datetime)
            and (start.tzinfo is None or end.tzinfo is None)
        ):
            raise RulesError("period datetimes need a timezone")
        if self.start > self.end or (is_dt[0] and self.start == self.end):
            name = f"period {self.label!r}" if self.label else "period"
            raise RulesError(f"{name} starts ({self.start}) after it ends ({self.end})")

    @property
    def is_dates(self) -> bool:
        return not isinstance(self.start, datetime)

    def interval(self, zone: tzinfo) -> tuple[datetime, datetime]:
        if self.is_dates:
            return local_midnight(zone, self.start), local_midnight(zone, self.end + ONE_DAY)
        # Not dates: __post_init__ made both datetimes.
        return to_utc(cast(datetime, self.start)), to_utc(cast(datetime, self.end))


class Intervals:
    """Sorted, merged, half-open UTC intervals with bisect lookups."""

    def __init__(self, pairs: Iterable[tuple[datetime, datetime]]) -> None:
        merged: list[list[datetime]] = []
        for start, end in sorted(pairs):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.starts = [s for s, _ in merged]
        self.ends = [e for _, e in merged]

    def __bool__(self) -> bool:
        return bool(self.starts)

    def containing(self, t: datetime) -> int | None:
        """Index of the interval containing t, or None."""
        i = bisect.bisect_right(self.starts, t) - 1
        return i if i >= 0 and t < self.ends[i] else None

    def next_start(self, t: datetime) -> datetime | None:
        """The first interval start strictly after t, or None."""
        i = bisect.bisect_right(self.starts, t)
        return self.starts[i] if i < len(self.starts) else None
