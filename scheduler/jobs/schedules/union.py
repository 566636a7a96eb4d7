"""A job's instants from more than its one `schedule` (docs/design.md §14):
several schedules, each on its own clock, one-shot instants (`at`), and the
bounds no occurrence falls outside (`not_before`, `not_after`).

The job fires at the union of its sources' instants, once per instant: two
schedules that give the same instant fire once. Each source keeps its own
meaning (DST rules, Quartz and H forms, `@business_day`); the calendar
gates each as it gates a lone schedule (`scheduler.jobs.cron.next_fire`).

`@every` counts from the job's last instant when it is the job's only
source. In a union, the other sources' instants would move that anchor, so
there it runs on a fixed grid instead: through `not_before` when the job
has one, else through the Unix epoch (`@every 15m` then fires at :00, :15,
:30 and :45).

Pure: no database, no clock.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from calendars.periods import EARLIEST, LATEST, RANGE_PROBLEM
from scheduler.jobs.schedules.errors import ScheduleError
from scheduler.jobs.schedules.schedule import Schedule

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TINY = timedelta(microseconds=1)


@dataclass(frozen=True)
class Source:
    """One schedule of a job, on the clock it is read in."""

    schedule: Schedule
    zone: ZoneInfo


@dataclass(frozen=True)
class Timing:
    """When a job may fire: its sources' instants and its one-shot instants
    (sorted, distinct, in UTC), inside [not_before, not_after]."""

    sources: tuple[Source, ...] = ()
    at: tuple[datetime, ...] = ()
    not_before: datetime | None = None
    not_after: datetime | None = None

    @property
    def alone(self) -> bool:
        """Whether one schedule is the job's only source: `@every` then
        counts from the job's last instant, as it always has."""
        return len(self.sources) == 1 and not self.at

    @property
    def empty(self) -> bool:
        return not self.sources and not self.at

    def start(self, after: datetime) -> datetime:
        """Where the search for the instant after `after` starts: an
        instant at `not_before` itself may fire."""
        if self.not_before is not None and after < self.not_before:
            return self.not_before - TINY
        return after

    def since(self, source: Source, start: datetime) -> datetime:
        """What `next_fire` counts `source`'s next instant from. Cron and
        `@business_day` instants are fixed: from `start`. `@every` counts
        from its anchor: alone, the last instant (`start`), or `not_before`
        when the search starts there; in a union, its grid (module doc)."""
        every = source.schedule.every
        if every is None:
            return start
        if self.alone:
            if self.not_before is not None and start < self.not_before:
                return self.not_before - every  # the first instant is not_before
            return start
        grid = self.not_before or EPOCH
        return grid + ((start - grid) // every) * every

    def next_at(self, after: datetime) -> int:
        """The index in `at` of the first one-shot instant after `after`."""
        return bisect.bisect_right(self.at, after)

    def within(self, instant: datetime | None) -> datetime | None:
        """`instant` when `not_after` allows it, else None."""
        if instant is None or (self.not_after is not None and instant > self.not_after):
            return None
        return instant

    def shifted(self, offset: timedelta) -> Timing:
        """This timing with its bounds `offset` earlier: a job's jitter moves
        its fire instants later, and the bounds judge the fire instants."""
        if not offset or (self.not_before is None and self.not_after is None):
            return self
        return Timing(
            self.sources,
            self.at,
            self.not_before - offset if self.not_before is not None else None,
            self.not_after - offset if self.not_after is not None else None,
        )


def parse_instant(text: Any) -> datetime:
    """An ISO 8601 instant with its offset, in UTC; ScheduleError otherwise."""
    if isinstance(text, datetime):
        moment = text
    else:
        try:
            moment = datetime.fromisoformat(str(text))
        except ValueError:
            raise ScheduleError(
                f"{str(text)[:80]!r} is not an ISO 8601 instant, e.g. 2026-06-01T09:00:00+02:00"
            ) from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ScheduleError(
            f"{str(text)[:80]!r} needs an offset (Z or +02:00): an instant is the same "
            "moment everywhere"
        )
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:
        moment = EPOCH - TINY  # out of range either way
    if not EARLIEST <= moment <= LATEST:
        # As every instant Croniq stores: no arithmetic on it can overflow.
        raise ScheduleError(f"{str(text)[:80]!r} {RANGE_PROBLEM}")
    return moment


def instants(texts: Iterable[Any]) -> tuple[datetime, ...]:
    """One-shot instants as `Timing.at` holds them: sorted, distinct, UTC."""
    return tuple(sorted({parse_instant(text) for text in texts}))
