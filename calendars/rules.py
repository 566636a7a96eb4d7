"""When a calendar allows an instant, and when it next does.

Pure and database-free: `Calendar.rules()` turns a row into a `CalendarRules`
value, and the scheduler's cron math (`scheduler/jobs/cron.py`) asks it questions.

Everything is interval arithmetic. From a blocked instant we jump straight to
the end of whatever blocks it (the end of a blackout, the midnight of the next
allowed day, the next window start, the next include period), so the cost of
`next_allowed` grows with the number of blocked stretches crossed, never with
their length. A three-week Christmas freeze is a handful of jumps.

Day-level rules (weekdays, holidays, date periods) read the local date of the
instant in the calendar's timezone; the daily window reads its local wall time.
A window whose end is before its start crosses midnight (22:00-06:00 allows
late evening and early morning of every allowed day, each by its own date).
"""

from __future__ import annotations

import calendar as stdlib_calendar
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import cached_property
from typing import Any, cast
from zoneinfo import ZoneInfo

from calendars.periods import Intervals, Period
from calendars.public_holidays import holiday_names, holiday_problem
from calendars.zones import (
    ONE_DAY,
    RulesError,
    add_years,
    get_zone,
    instants_with_wall,
    local_midnight,
    next_transition,
    to_utc,
    wall,
)

WEEKDAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DEFAULT_HORIZON_YEARS = 5

# How far a search looks: an instant, a span after its start, or None (5 years).
Horizon = datetime | timedelta | None


def _normalise_weekdays(weekdays: Iterable[int | str]) -> frozenset[int]:
    days: set[int] = set()
    for day in weekdays:
        if isinstance(day, str):
            if day.lower() not in WEEKDAY_NAMES:
                raise RulesError(f"{day!r} is not a weekday (use {', '.join(WEEKDAY_NAMES)})")
            day = WEEKDAY_NAMES.index(day.lower())
        if not 0 <= day <= 6:
            raise RulesError(f"weekday {day} is out of range 0-6 (0 is Monday)")
        days.add(day)
    return frozenset(days)


# --- the rules ---------------------------------------------------------------


@dataclass(frozen=True)
class CalendarRules:
    """Allowed time of one calendar (and its base chain), as plain values.

    An instant is allowed when its local date is an allowed weekday and no
    holiday, its wall time is inside the daily window (if any), it is in no
    exclude period, inside some include period (when there are any), and the
    base calendar (if any) allows it too.
    """

    timezone: str = "UTC"
    # Names ("mon") or numbers (0 is Monday) given; numbers kept.
    weekdays: frozenset[int] = frozenset(range(7))
    holiday_country: str = ""
    holiday_subdivision: str = ""
    holiday_categories: tuple[str, ...] = ()
    window_start: time | None = None
    window_end: time | None = None
    exclude: tuple[Period, ...] = ()
    include: tuple[Period, ...] = ()
    base: CalendarRules | None = None
    name: str = ""

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        get_zone(self.timezone)
        set_("weekdays", _normalise_weekdays(self.weekdays))
        set_("holiday_categories", tuple(sorted(self.holiday_categories or ())))
        set_("exclude", tuple(self.exclude))
        set_("include", tuple(self.include))
        problem = holiday_problem(
            self.holiday_country, self.holiday_subdivision, self.holiday_categories
        )
        if problem:
            raise RulesError(problem)
        if (self.window_start is None) != (self.window_end is None):
            raise RulesError("a daily window needs both a start and an end")
        if self.window_start is not None and self.window_start == self.window_end:
            raise RulesError(
                f"daily window starts and ends at {self.window_start:%H:%M}; "
                "leave both empty to allow the whole day"
            )

    # derived values, computed once per value

    @cached_property
    def zone(self) -> ZoneInfo:
        return get_zone(self.timezone)

    @cached_property
    def _excluded(self) -> Intervals:
        return Intervals(p.interval(self.zone) for p in self.exclude)

    @cached_property
    def _included(self) -> Intervals:
        return Intervals(p.interval(self.zone) for p in self.include)

    @cached_property
    def _weekdays_and_holidays_only(self) -> bool:
        """Whether a day's weekday and holidays alone decide whether it is allowed."""
        no_periods = not self.exclude and not self.include
        return self.window_start is None and no_periods and self.base is None

    # predicates

    def _day_allowed(self, day: date) -> bool:
        return day.weekday() in self.weekdays and day not in self._holidays(day.year)

    def _holidays(self, year: int) -> dict[date, str]:
        return holiday_names(
            self.holiday_country, self.holiday_subdivision, self.holiday_categories, year
        )

    def _in_window(self, wall_time: time) -> bool:
        start, end = self.window_start, self.window_end
        if start is None or end is None:  # both or neither (__post_init__)
            return True
        if start < end:
            return start <= wall_time < end
        return wall_time >= start or wall_time < end  # crosses midnight

    def is_allowed(self, t: datetime) -> bool:
        """Whether instant `t` (aware) is allowed. A direct check, no jumping."""
        t = to_utc(t)
        local = wall(self.zone, t)
        return (
            self._day_allowed(local.date())
            and self._in_window(local.time())
            and self._excluded.containing(t) is None
            and (not self._included or self._included.containing(t) is not None)
            and (self.base is None or self.base.is_allowed(t))
        )

    # jumps

    def next_allowed(self, t: datetime, horizon: Horizon = None) -> datetime | None:
        """The first allowed instant >= t, or None when there is none within the horizon.

        `horizon` is an instant, a timedelta after t, or None for 5 years.
        """
        t = to_utc(t)
        return self._next_allowed(t, self._limit(t, horizon))

    def _limit(self, t: datetime, horizon: Horizon) -> datetime:
        if horizon is None:
            return add_years(t, DEFAULT_HORIZON_YEARS)
        if isinstance(horizon, timedelta):
            return t + horizon
        return to_utc(horizon)

    def _next_allowed(self, t: datetime | None, limit: datetime) -> datetime | None:
        while t is not None and t <= limit:
            own = self._skip_own_block(t, limit)
            if own != t:
                t = own
                continue
            if self.base is None:
                return t
            based = self.base._next_allowed(t, limit)
            if based == t:
                return t
            t = based
        return None

    def _skip_own_block(self, t: datetime, limit: datetime) -> datetime | None:
        """t itself when this calendar's own rules allow it, else where the block ends."""
        local = wall(self.zone, t)
        if not self._day_allowed(local.date()):
            day = self._next_allowed_day(local.date(), limit)
            return None if day is None else local_midnight(self.zone, day)
        i = self._excluded.containing(t)
        if i is not None:
            return self._excluded.ends[i]
        if self._included and self._included.containing(t) is None:
            return self._included.next_start(t)
        if not self._in_window(local.time()):
            return self._next_window_open(t)
        return t

    def _next_allowed_day(self, day: date, limit: datetime) -> date | None:
        if not self.weekdays:
            return None
        last = wall(self.zone, limit).date()
        day += ONE_DAY
        while day <= last:
            if self._day_allowed(day):
                return day
            day += ONE_DAY
        return None

    def _window_edges(self, t: datetime, edge: time) -> list[datetime]:
        """The instants after t whose wall time is `edge`: today's, else tomorrow's."""
        today = wall(self.zone, t).date()
        for day in (today, today + ONE_DAY):
            found = [x for x in instants_with_wall(self.zone, datetime.combine(day, edge)) if x > t]
            if found:
                return found
        return []

    def _next_window_open(self, t: datetime) -> datetime:
        # The wall time enters the window at a window start, or by a DST jump
        # that lands inside it.
        candidates = self._window_edges(t, cast(time, self.window_start))
        tr = next_transition(self.zone, t)
        if tr and self._in_window(wall(self.zone, tr[0]).time()):
            candidates.append(tr[0])
        if candidates:
            return min(candidates)
        # Both starts fell into DST gaps: try again from tomorrow.
        return self._next_window_open(t + ONE_DAY)

    def _next_window_close(self, t: datetime) -> datetime:
        candidates = self._window_edges(t, cast(time, self.window_end))
        tr = next_transition(self.zone, t)
        if tr and not self._in_window(wall(self.zone, tr[0]).time()):
            candidates.append(tr[0])
        return min(candidates) if candidates else self._next_window_close(t + ONE_DAY)

    def allowed_until(self, t: datetime, horizon: Horizon = None) -> datetime | None:
        """The end (exclusive) of the allowed stretch containing t.

        t itself when t is blocked; None when it stays allowed past the horizon.
        """
        t = to_utc(t)
        limit = self._limit(t, horizon)
        cur: datetime | None = t
        while cur is not None and cur <= limit:
            if not self.is_allowed(cur):
                return cur
            cur = self._stretch_end(cur, limit)
            if cur is None:
                return None
        return None

    def _stretch_end(self, t: datetime, limit: datetime) -> datetime | None:
        """The first instant after allowed t where some rule (own or base) may block."""
        maybe = [self._own_stretch_end(t, limit)]
        if self.base is not None:
            maybe.append(self.base._stretch_end(t, limit))
        ends = [e for e in maybe if e is not None]
        return min(ends) if ends else None

    def _own_stretch_end(self, t: datetime, limit: datetime) -> datetime | None:
        ends: list[datetime] = []
        nxt = self._excluded.next_start(t)
        if nxt is not None:
            ends.append(nxt)
        i = self._included.containing(t)
        if i is not None:
            ends.append(self._included.ends[i])
        if self.window_start is not None:
            ends.append(self._next_window_close(t))
        # Scan days only up to the nearest other end: a daily window keeps
        # this short, however long the run of allowed days.
        last = wall(self.zone, min([*ends, limit])).date()
        day = wall(self.zone, t).date() + ONE_DAY
        while day <= last and self._day_allowed(day):
            day += ONE_DAY
        if day <= last:
            ends.append(local_midnight(self.zone, day))
        return min(ends) if ends else None

    def allowed_stretches(
        self, t: datetime, count: int, horizon: Horizon = None
    ) -> list[tuple[datetime, datetime | None]]:
        """Up to `count` (start, end) allowed stretches from t on; end None = open-ended."""
        t = to_utc(t)
        limit = self._limit(t, horizon)
        found: list[tuple[datetime, datetime | None]] = []
        while len(found) < count:
            start = self._next_allowed(t, limit)
            if start is None:
                break
            end = self.allowed_until(start, limit)
            found.append((start, end))
            if end is None:
                break
            t = end
        return found

    def block_reason(self, t: datetime) -> str:
        """Why instant `t` is blocked, in a few words ("" when it is allowed)."""
        t = to_utc(t)
        local = wall(self.zone, t)
        reason = self._day_reason(local.date())
        if reason:
            return reason
        for period in self.exclude:
            start, end = period.interval(self.zone)
            if start <= t < end:
                return period.label or "blackout"
        if self._included and self._included.containing(t) is None:
            return "outside include periods"
        if not self._in_window(local.time()):
            return f"outside the daily window {self.window_start:%H:%M}-{self.window_end:%H:%M}"
        if self.base is not None:
            reason = self.base.block_reason(t)
            if reason:
                return f"{reason} (base calendar {self.base.name})".replace(" ()", "")
        return ""

    # whole days: the admin's month grid, `@business_day` counting

    def day_allowed(self, day: date) -> bool:
        """Whether the calendar allows any instant of local date `day`."""
        if not self._day_allowed(day):
            return False  # weekday and holidays decide most days, and cheaply
        if self._weekdays_and_holidays_only:
            return True
        return self._any_allowed(*self._day_bounds(day))

    def allowed_days(self, year: int, month: int) -> list[date]:
        """The local dates of a month that `day_allowed`, in order."""
        days = stdlib_calendar.monthrange(year, month)[1]
        return [
            d for d in (date(year, month, i) for i in range(1, days + 1)) if self.day_allowed(d)
        ]

    def day_status(self, day: date) -> tuple[bool, str]:
        """(allowed, reason) for a local date: allowed when any instant of it is."""
        start, end = self._day_bounds(day)
        if self._any_allowed(start, end):
            return True, ""
        return False, self._block_reason(day, start, end)

    def _day_bounds(self, day: date) -> tuple[datetime, datetime]:
        return local_midnight(self.zone, day), local_midnight(self.zone, day + ONE_DAY)

    def _any_allowed(self, start: datetime, end: datetime) -> bool:
        found = self._next_allowed(start, end)
        return found is not None and found < end

    def _day_reason(self, day: date) -> str:
        """Why a whole local date is blocked by its weekday or a holiday, or ""."""
        if day.weekday() not in self.weekdays:
            return "weekend" if day.weekday() >= 5 else "not an allowed weekday"
        return self._holidays(day.year).get(day) or ""

    def _block_reason(self, day: date, start: datetime, end: datetime) -> str:
        reason = self._day_reason(day)
        if reason:
            return reason
        for period in self.exclude:
            p_start, p_end = period.interval(self.zone)
            if p_start < end and start < p_end:
                return period.label or "blackout"
        if self._included and not any(
            s < end and start < e
            for s, e in zip(self._included.starts, self._included.ends, strict=True)
        ):
            return "outside include periods"
        if self.base is not None:
            allowed, reason = self.base.day_status(day)
            if not allowed:
                return f"{reason} (base calendar {self.base.name})".replace(" ()", "")
        return "outside the daily window"


def month_grid(rules: CalendarRules, first_day: date, months: int = 3) -> list[dict[str, Any]]:
    """Months from `first_day`'s month on, as weeks (Monday first) of day cells."""
    grid: list[dict[str, Any]] = []
    year, month = first_day.year, first_day.month
    for _ in range(months):
        weeks: list[list[dict[str, Any] | None]] = []
        for week in stdlib_calendar.Calendar().monthdatescalendar(year, month):
            cells: list[dict[str, Any] | None] = []
            for day in week:
                if day.month != month:
                    cells.append(None)
                    continue
                allowed, reason = rules.day_status(day)
                cells.append({"date": day, "allowed": allowed, "reason": reason})
            weeks.append(cells)
        grid.append({"title": date(year, month, 1).strftime("%B %Y"), "weeks": weeks})
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return grid
