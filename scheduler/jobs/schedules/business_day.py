"""`@business_day N HH:MM`: its days of the month and its instants.

It fires on the Nth day of each month that the job's calendar allows (N < 0
counts from the month's end; Monday to Friday without a calendar), at wall
time HH:MM in the job's timezone. A day counts when the calendar allows any
instant of it, as the admin's month grid shows it (`CalendarRules.day_allowed`:
weekdays, holidays, blackouts, include periods, base calendars, and a daily
window that DST leaves somewhere on the day). Days are dates: the calendar
judges the date, the job's timezone places HH:MM on it. The instant is then
gated by the calendar like any other (skip or defer, scheduler.jobs.cron), so
a daily window that closes before HH:MM makes the occurrence skip to the next
month or defer to the next window.
"""

from __future__ import annotations

import calendar as stdlib_calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from calendars.rules import CalendarRules
from calendars.zones import resolve_wall, wall
from scheduler.jobs.schedules.errors import ScheduleError

ONE_DAY = timedelta(days=1)
LONGEST_MONTH = 31  # with a Monday-to-Friday week, at most 23 days count
MONDAY_TO_FRIDAY = frozenset(range(5))
DAY_NUMBER_RE = re.compile(r"^[+-]?\d{1,9}$")
TIME_OF_DAY_RE = re.compile(r"^(\d{1,2}):(\d{2})$")
BUSINESS_DAY_USAGE = (
    "write it as @business_day N HH:MM, e.g. @business_day 3 09:00 "
    "(the 3rd business day of the month) or @business_day -1 18:00 (the last)"
)


@dataclass(frozen=True)
class BusinessDay:
    """The Nth allowed day of each month (N < 0: from its end) at a wall time."""

    n: int
    at: time

    def nth_day(self, calendar: CalendarRules | None, year: int, month: int) -> date | None:
        """The local date this month's occurrence falls on, or None (too few days)."""
        allowed = _business_day_check(calendar)
        last = stdlib_calendar.monthrange(year, month)[1]
        numbers = range(1, last + 1) if self.n > 0 else range(last, 0, -1)
        wanted = abs(self.n)
        for number in numbers:  # stops at the Nth: N is small, months are short
            day = date(year, month, number)
            if allowed(day):
                wanted -= 1
                if not wanted:
                    return day
        return None

    def describe(self) -> str:
        which = "last" if self.n == -1 else _ordinal(abs(self.n))
        if self.n < -1:
            which += "-to-last"
        return f"On the {which} business day of the month at {self.at:%H:%M}"


def parse_business_day(text: str) -> BusinessDay:
    """The BusinessDay `@business_day N HH:MM` names; ScheduleError if written wrong."""
    parts = text.split(" ")
    if parts[0].lower() != "@business_day":
        raise ScheduleError(f"unknown macro {parts[0]!r}: {BUSINESS_DAY_USAGE}")
    if len(parts) != 3:
        missing = "the day number" if ":" in parts[-1] else "the time"
        problem = {1: "the day number and the time are missing", 2: f"{missing} is missing"}
        what = problem.get(len(parts), "it has more than a day number and a time")
        raise ScheduleError(f"{text!r}: {what}; {BUSINESS_DAY_USAGE}")
    return BusinessDay(_day_number(text, parts[1]), _time_of_day(text, parts[2]))


def _day_number(text: str, token: str) -> int:
    if not DAY_NUMBER_RE.match(token):
        raise ScheduleError(
            f"{text!r}: day number {token!r} is not a whole number; {BUSINESS_DAY_USAGE}"
        )
    n = int(token)
    if n == 0:
        raise ScheduleError(
            f"{text!r}: day number 0 does not exist: 1 is the first business day of the month, "
            "-1 the last"
        )
    if abs(n) > LONGEST_MONTH:
        raise ScheduleError(
            f"{text!r}: day number {n} is out of range: a month has at most {LONGEST_MONTH} days "
            f"(1 to {LONGEST_MONTH} from its start, -1 to -{LONGEST_MONTH} from its end)"
        )
    return n


def _time_of_day(text: str, token: str) -> time:
    match = TIME_OF_DAY_RE.match(token)
    hour, minute = (int(g) for g in match.groups()) if match else (-1, -1)
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        raise ScheduleError(
            f"{text!r}: time {token!r} is not a time of day: write HH:MM from 00:00 to 23:59"
        )
    return time(hour, minute)


def _business_day_check(calendar: CalendarRules | None) -> Callable[[date], bool]:
    if calendar is None:
        return lambda day: day.weekday() in MONDAY_TO_FRIDAY
    check: Callable[[date], bool] = calendar.day_allowed
    return check


def next_month(year: int, month: int) -> tuple[int, int]:
    return (year + 1, 1) if month == 12 else (year, month + 1)


def business_day_next(
    business_day: BusinessDay,
    zone: ZoneInfo,
    calendar: CalendarRules | None,
    after: datetime,
    limit: datetime,
) -> datetime | None:
    """The first occurrence strictly after `after` (calendar gate not applied), or None."""
    # From the day before: the end of a DST gap may carry an occurrence past midnight.
    start = wall(zone, after).date() - ONE_DAY
    last = wall(zone, limit).date()
    year, month = start.year, start.month
    while date(year, month, 1) <= last:
        day = business_day.nth_day(calendar, year, month)
        if day is not None:
            # The Debian rule: the first of a repeated wall time, the gap's end for a missing one.
            instant: datetime = resolve_wall(zone, datetime.combine(day, business_day.at))
            if instant > limit:
                return None
            if instant > after:
                return instant
        year, month = next_month(year, month)
    return None


def months_short(
    business_day: BusinessDay, calendar: CalendarRules | None, first: date, last: date
) -> list[tuple[date, int]]:
    """The months from `first`'s to `last`'s with fewer allowed days than N,
    as [(first day, days allowed)]."""
    found = []
    year, month = first.year, first.month
    while date(year, month, 1) <= last:
        if business_day.nth_day(calendar, year, month) is None:
            found.append((date(year, month, 1), len(_allowed_days(calendar, year, month))))
        year, month = next_month(year, month)
    return found


def _allowed_days(calendar: CalendarRules | None, year: int, month: int) -> list[date]:
    if calendar is not None:
        days: list[date] = calendar.allowed_days(year, month)
        return days
    count = stdlib_calendar.monthrange(year, month)[1]
    return [
        d
        for d in (date(year, month, i) for i in range(1, count + 1))
        if d.weekday() in MONDAY_TO_FRIDAY
    ]


def _ordinal(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
