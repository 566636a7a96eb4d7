"""A parsed schedule, and which days it allows (Vixie cron's two day fields,
Quartz's L, W and # forms decided per month)."""

from __future__ import annotations

from calendar import monthrange
from dataclasses import dataclass
from datetime import date, timedelta

from scheduler.jobs.schedules.business_day import BusinessDay

LAST = -1  # "the last one of the month" in a Quartz day form
# A day-of-month form: LAST for `L`, ("W", n) for `nW`, ("W", LAST) for `LW`.
MonthDayForm = int | tuple[str, int]
# A day-of-week form: (weekday, n) for `w#n`, (weekday, LAST) for `wL`.
WeekdayForm = tuple[int, int]


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: cron fields, a fixed interval (`@every`) or a business day."""

    text: str
    every: timedelta | None = None
    expression: str = ""
    minutes: tuple[int, ...] = ()
    hours: tuple[int, ...] = ()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()  # 0 = Sunday, as in cron
    dom_star: bool = True
    dow_star: bool = True
    hour_star: bool = True  # the hour field covers all 24 hours
    minute_star: bool = False  # the minute field starts with `*` (`*`, `*/5`)
    business_day: BusinessDay | None = None  # `@business_day N HH:MM`
    # Quartz forms, decided per month (MonthDayForm, WeekdayForm).
    month_days: tuple[MonthDayForm, ...] = ()
    month_weekdays: tuple[WeekdayForm, ...] = ()

    def __str__(self) -> str:
        return self.text

    @property
    def fixed_time(self) -> bool:
        """Whether the Debian fixed-time-of-day DST rule applies.

        It does unless the minute field starts with `*` (`* 2 * * *`, `*/5 2
        * * *`: Debian cron's MIN_STAR, so such a job runs in both passes of
        a repeated hour and not in a skipped one, as under cron) or the hour
        field covers every hour (`*`, `*/1`, `0-23`): such a job runs at
        least hourly and follows absolute time. `0 */2 * * *` is a fixed
        time of day, so it fires once in a repeated hour and right after a
        gap (never zero, never two), where cron (HR_STAR) would not.
        """
        return self.every is None and not self.hour_star and not self.minute_star

    def day_matches(self, day: date) -> bool:
        weekday = (day.weekday() + 1) % 7
        dom = day.day in self.days or (bool(self.month_days) and _quartz_day(self.month_days, day))
        dow = weekday in self.weekdays or (
            bool(self.month_weekdays) and _quartz_weekday(self.month_weekdays, day, weekday)
        )
        # Vixie cron: when either day field starts with `*`, both must match;
        # when both are restricted, either one is enough.
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow


def _quartz_day(forms: tuple[MonthDayForm, ...], day: date) -> bool:
    """Whether `day` is one of the day-of-month forms L, LW or NW."""
    last = monthrange(day.year, day.month)[1]
    for form in forms:
        if isinstance(form, int):  # LAST
            if day.day == last:
                return True
        elif day.day == nearest_weekday(day.year, day.month, last if form[1] == LAST else form[1]):
            return True
    return False


def nearest_weekday(year: int, month: int, n: int) -> int | None:
    """Quartz `nW`: the weekday nearest day n, never in another month; None
    when the month has no day n (as plain `31` skips short months)."""
    last = monthrange(year, month)[1]
    if n > last:
        return None
    weekday = date(year, month, n).weekday()  # Monday = 0
    if weekday == 5:  # Saturday: the Friday before, or Monday the 3rd for the 1st
        return 3 if n == 1 else n - 1
    if weekday == 6:  # Sunday: the Monday after, or the Friday before for the last day
        return n - 2 if n == last else n + 1
    return n


def _quartz_weekday(forms: tuple[WeekdayForm, ...], day: date, weekday: int) -> bool:
    """Whether `day` is one of the day-of-week forms `w#n` or `wL`."""
    for form_weekday, n in forms:
        if form_weekday != weekday:
            continue
        if n == LAST:
            if day.day + 7 > monthrange(day.year, day.month)[1]:
                return True
        elif (day.day - 1) // 7 + 1 == n:
            return True
    return False
