"""Schedules and their next fire instants, DST-correct and calendar-gated.

Pure: no database, no clock. Callers pass `after` (the last scheduled instant,
or now) and get aware UTC datetimes back.

DST follows the Debian cron rule (docs/design.md §3). A job whose hour field is
not `*` runs at a fixed time of day: when that wall time occurs twice it fires
once (the first occurrence), and when it does not exist it fires right after
the gap. A job whose hour field is `*` follows absolute time through both
transitions. We evaluate cron on constant-offset segments of the zone (between
two transitions wall time is just UTC plus an offset) and apply the rule at
the segment borders; croniter alone fires `30 2 * * *` twice on a fall-back
day.

Calendars never make us discard candidates one by one: from a blocked
candidate we ask the calendar for its next allowed instant and continue the
cron search from there.
"""

from __future__ import annotations

import bisect
import calendar as stdlib_calendar
import functools
import hashlib
import re
from calendar import monthrange
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from cron_descriptor import get_description
from croniter import croniter

from calendars.rules import DEFAULT_HORIZON_YEARS
from calendars.zones import (
    RulesError,
    add_years,
    as_utc,
    get_zone,
    last_transition,
    resolve_wall,
    segment_end,
    to_utc,
    wall,
)

SKIP = "skip"
DEFER = "defer"
ONE_MINUTE = timedelta(minutes=1)
ONE_HOUR = timedelta(hours=1)
ONE_DAY = timedelta(days=1)
TINY = timedelta(microseconds=1)

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTH_NAMES = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DOW_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# (name, lowest, highest, names for the lowest values on)
FIELDS = [
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day-of-month", 1, 31, None),
    ("month", 1, 12, MONTH_NAMES),
    ("day-of-week", 0, 7, DOW_NAMES),
]
LONGEST_EVERY = timedelta(days=36500)  # a hundred years
EVERY_RE = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
# Jenkins' hash forms, minute and hour fields: H, H(a-b), H/n, H(a-b)/n.
HASH_RE = re.compile(r"^H(?:\((\d+)-(\d+)\))?(?:/(\d+))?$", re.IGNORECASE)
# Quartz day forms: day-of-month L, LW, 15W; day-of-week 5L, 1#2 (names too: fri#2).
NEAREST_WEEKDAY_RE = re.compile(r"^(\d+)W$", re.IGNORECASE)
NTH_WEEKDAY_RE = re.compile(r"^([a-z0-9]+)(?:#(\d+)|(L))$", re.IGNORECASE)
LAST = -1  # "the last one of the month" in a Quartz day form


class ScheduleError(ValueError):
    """A schedule that cannot be parsed, with a message a person understands."""


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: cron fields, a fixed interval (`@every`) or a business day."""

    text: str
    every: timedelta | None = None
    expression: str = ""
    minutes: tuple = ()
    hours: tuple = ()
    days: frozenset = frozenset()
    months: frozenset = frozenset()
    weekdays: frozenset = frozenset()  # 0 = Sunday, as in cron
    dom_star: bool = True
    dow_star: bool = True
    hour_star: bool = True  # the hour field covers all 24 hours
    business_day: BusinessDay | None = None  # `@business_day N HH:MM`
    # Quartz forms, decided per month. Day of month: LAST for `L`, ("W", n)
    # for `nW` and ("W", LAST) for `LW`. Day of week: (weekday, n) for `w#n`,
    # (weekday, LAST) for `wL`.
    month_days: tuple = ()
    month_weekdays: tuple = ()

    def __str__(self):
        return self.text

    @property
    def fixed_time(self):
        """Whether the Debian fixed-time-of-day DST rule applies.

        It does unless the hour field covers every hour (`*`, `*/1`, `0-23`):
        such a job runs at least hourly and follows absolute time. `*/2` is a
        fixed time of day, so it fires once in a repeated hour and right
        after a gap (never zero, never two).
        """
        return self.every is None and not self.hour_star

    def day_matches(self, day):
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


def _quartz_day(forms, day):
    """Whether `day` is one of the day-of-month forms L, LW or NW."""
    last = monthrange(day.year, day.month)[1]
    for form in forms:
        if form == LAST:
            if day.day == last:
                return True
        elif day.day == nearest_weekday(day.year, day.month, last if form[1] == LAST else form[1]):
            return True
    return False


def nearest_weekday(year, month, n):
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


def _quartz_weekday(forms, day, weekday):
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


# --- parsing -----------------------------------------------------------------


def parse_schedule(text, key=None):
    """A Schedule from cron text, a macro or `@every <duration>`; ScheduleError if bad.

    `key` (the job's name) seeds the `H` forms; a schedule with `H` and no
    key is refused, so that no caller silently gives every job one minute.
    """
    if isinstance(text, Schedule):
        return text
    if not isinstance(text, str):
        raise ScheduleError("schedule is empty: use 5 cron fields, a macro or @every <duration>")
    # Only texts that can hold an H depend on the key: one cache entry for the rest.
    return _parse_text(text, (key or None) if uses_key(text) else None)


def uses_key(text):
    """Whether the minute or hour field holds an `H` form (its values depend on the key)."""
    fields = text.split() if isinstance(text, str) else []
    return len(fields) == 5 and any(i[:1] in "hH" for f in fields[:2] for i in f.split(","))


@functools.lru_cache(maxsize=1024)  # the scheduler asks about the same few texts every tick
def _parse_text(text, key=None):
    if not text.strip():
        raise ScheduleError("schedule is empty: use 5 cron fields, a macro or @every <duration>")
    cleaned = " ".join(text.split())
    lowered = cleaned.lower()
    if lowered.startswith("@every"):
        return _parse_every(cleaned)
    if lowered.startswith("@business_day"):
        return _parse_business_day(cleaned)
    if lowered.startswith("@"):
        if lowered not in MACROS:
            known = ", ".join(sorted(MACROS))
            raise ScheduleError(
                f"unknown macro {cleaned!r} (known: {known}, @every <duration>, "
                "@business_day N HH:MM)"
            )
        return _parse_cron(MACROS[lowered], text=cleaned)
    return _parse_cron(cleaned, text=cleaned, key=key)


def _parse_every(text):
    _, _, duration = text.partition(" ")
    match = EVERY_RE.match(duration.strip().lower())
    if not duration.strip() or not match:
        raise ScheduleError(
            f"{text!r}: write the interval as days, hours, minutes and seconds, "
            "e.g. @every 30s, @every 5m, @every 1h30m, @every 2d"
        )
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    try:
        interval = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    except OverflowError:
        interval = LONGEST_EVERY + ONE_DAY
    if interval <= timedelta(0):
        raise ScheduleError(f"{text!r}: the interval must be longer than zero")
    if interval > LONGEST_EVERY:
        # Past it the date arithmetic overflows; nothing that rare fires anyway.
        raise ScheduleError(f"{text!r}: the interval must be at most {LONGEST_EVERY.days}d")
    return Schedule(text=text, every=interval)


def _parse_cron(expression, text, key=None):
    fields = expression.split(" ")
    if len(fields) != 5:
        raise ScheduleError(
            f"schedule {text!r} has {len(fields)} fields; cron needs 5 "
            "(minute hour day-of-month month day-of-week), e.g. '30 2 * * *'"
        )
    parsed = [_parse_field(f, *spec, key=key) for f, spec in zip(fields, FIELDS, strict=True)]
    (minutes, _), (hours, _), (days, month_days), (months, _), (weekdays, month_weekdays) = parsed
    # The H forms resolved, so croniter and the describer read plain numbers.
    expression = " ".join([_numbers(minutes, fields[0]), _numbers(hours, fields[1]), *fields[2:]])
    if not croniter.is_valid(_plain(expression)):  # we agree with croniter on what is cron
        raise ScheduleError(f"schedule {text!r} is not a valid cron expression")
    return Schedule(
        text=text,
        expression=expression,
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=frozenset(days),
        months=frozenset(months),
        weekdays=frozenset(d % 7 for d in weekdays),  # 7 is Sunday too
        dom_star=fields[2].startswith(("*", "?")),
        dow_star=fields[4].startswith(("*", "?")),
        hour_star=len(hours) == 24,
        month_days=month_days,
        month_weekdays=tuple(sorted((d % 7, n) for d, n in month_weekdays)),
    )


def _numbers(values, field):
    """A minute or hour field as croniter reads it: H forms resolved."""
    if not any(item[:1] in "hH" for item in field.split(",")):
        return field
    return ",".join(map(str, sorted(values)))


def _plain(expression):
    """The expression without Quartz day forms, which croniter reads only in part."""
    fields = expression.split(" ")
    for i, form in ((2, _is_quartz_day), (4, _is_quartz_weekday)):
        plain = [item for item in fields[i].split(",") if not form(item)]
        fields[i] = ",".join(plain) or "*"
    return " ".join(fields)


def _is_quartz_day(item):
    return item.upper() in ("L", "LW") or bool(NEAREST_WEEKDAY_RE.match(item))


def _is_quartz_weekday(item):
    return bool(NTH_WEEKDAY_RE.match(item))


def _parse_field(text, name, lo, hi, names, key=None):
    """The values a field allows, and its Quartz day forms (see Schedule)."""
    found, forms = set(), []
    for item in text.split(","):
        if not item:
            raise ScheduleError(f"{name} field: empty item in {text!r}")
        if item[:1] in "hH":
            found.update(_hashed_values(item, name, lo, hi, key))
            continue
        form = _quartz_form(item, name, lo, hi, names)
        if form is not None:
            forms.append(form)
            continue
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ScheduleError(f"{name} field: step {step_text!r} must be a whole number >= 1")
            step = int(step_text)
        if base in ("*", "?") and (base == "*" or name.startswith("day")):
            first, last = lo, hi
        elif "-" in base:
            a, _, b = base.partition("-")
            first, last = _field_value(a, name, lo, hi, names), _field_value(b, name, lo, hi, names)
            if first > last:
                raise ScheduleError(f"{name} field: range {base} runs backwards")
        else:
            first = _field_value(base, name, lo, hi, names)
            last = hi if slash else first  # "5/15" means from 5 to the end, every 15
        found.update(range(first, last + 1, step))
    return found, tuple(forms)


def _hashed_values(item, name, lo, hi, key):
    """Jenkins' `H`: a value of the field (or of `H(a-b)`) chosen by a stable
    hash of the key, so jobs spread out and each keeps its minute; `H/n` is
    every n from a hashed offset."""
    if name not in ("minute", "hour"):
        raise ScheduleError(f"{name} field: H is only for the minute and hour fields")
    match = HASH_RE.match(item)
    if not match:
        raise ScheduleError(
            f"{name} field: {item!r} is not a hash form: use H, H(a-b), H/n or H(a-b)/n"
        )
    if not key:
        raise ScheduleError(f"{name} field: H needs the job's name to hash, and none was given")
    a, b, step_text = match.groups()
    first, last = (int(a), int(b)) if a is not None else (lo, hi)
    for value in (first, last):
        if not lo <= value <= hi:
            raise ScheduleError(f"{name} field: {value} is out of range {lo}-{hi}")
    if first > last:
        raise ScheduleError(f"{name} field: range {item} runs backwards")
    digest = hashlib.sha256(f"{name}\x00{key}".encode()).digest()  # never hash(): per process
    hashed = int.from_bytes(digest[:8], "big")
    size = last - first + 1
    if step_text is None:
        return {first + hashed % size}
    step = int(step_text)
    if step < 1:
        raise ScheduleError(f"{name} field: step {step_text!r} must be a whole number >= 1")
    return set(range(first + hashed % min(step, size), last + 1, step))


def _quartz_form(item, name, lo, hi, names):
    """A Quartz day form of the day-of-month or day-of-week field, or None
    for a plain item; ScheduleError for a form written wrong or out of place."""
    upper = item.upper()
    if name == "day-of-month":
        return _month_day_form(item, upper, lo, hi)
    if name == "day-of-week":
        return _weekday_form(item, upper, lo, hi, names)
    if name in ("minute", "hour") and any(c in upper for c in "LW#"):
        raise ScheduleError(
            f"{name} field: {item!r}: L, W and # are only for the day-of-month "
            "and day-of-week fields"
        )
    return None


def _month_day_form(item, upper, lo, hi):
    if upper == "L":
        return LAST
    if upper == "LW":
        return ("W", LAST)
    match = NEAREST_WEEKDAY_RE.match(item)
    if match:
        day = int(match.group(1))
        if not lo <= day <= hi:
            raise ScheduleError(f"day-of-month field: {day} is out of range {lo}-{hi} in {item!r}")
        return ("W", day)
    if upper == "W":
        raise ScheduleError(
            "day-of-month field: 'W' needs a day before it, e.g. 15W (the weekday nearest the 15th)"
        )
    if "#" in upper:
        raise ScheduleError(
            f"day-of-month field: {item!r}: # belongs in the day-of-week field (1#2: second Monday)"
        )
    if "L" in upper or "W" in upper:
        raise ScheduleError(
            f"day-of-month field: {item!r} is not a day form: use L (the last day), "
            "LW (the last weekday) or a day and W (15W: the weekday nearest the 15th)"
        )
    return None


def _weekday_form(item, upper, lo, hi, names):
    if upper == "L":
        raise ScheduleError(
            "day-of-week field: 'L' needs a weekday before it, e.g. 5L (the last Friday)"
        )
    if "#" not in upper and not upper.endswith("L"):
        return None
    match = NTH_WEEKDAY_RE.match(item)
    if not match:
        raise ScheduleError(
            f"day-of-week field: {item!r}: L and # take one weekday, "
            "e.g. 5L (the last Friday) or 1#2 (the second Monday)"
        )
    base, nth, last = match.groups()
    weekday = _field_value(base, "day-of-week", lo, hi, names)
    if last:
        return (weekday, LAST)
    if not 1 <= int(nth) <= 5:
        raise ScheduleError(
            f"day-of-week field: {item!r}: the n of #n must be 1-5 (1#2: the second Monday)"
        )
    return (weekday, int(nth))


def _field_value(token, name, lo, hi, names):
    if token.isdigit():
        value = int(token)
        if not lo <= value <= hi:
            raise ScheduleError(f"{name} field: {value} is out of range {lo}-{hi}")
        return value
    if names and token.lower() in names:
        return names.index(token.lower()) + (lo if name == "month" else 0)
    hint = f" or a name ({', '.join(names)})" if names else ""
    raise ScheduleError(f"{name} field: {token!r} is not a number in {lo}-{hi}{hint}")


def _as_zone(tz):
    try:
        return get_zone(tz)
    except RulesError as exc:
        raise ScheduleError(str(exc)) from None


# --- cron on wall time ---------------------------------------------------------


def _next_wall_match(schedule, w, last):
    """The first naive wall time >= w (minute-aligned) that matches, or None after `last`."""
    while w <= last:
        if w.month not in schedule.months:
            w = _first_of_next_month(w)
        elif not schedule.day_matches(w.date()):
            w = _next_midnight(w)
        elif w.hour not in schedule.hours:
            i = bisect.bisect_right(schedule.hours, w.hour)
            if i < len(schedule.hours):
                w = datetime(w.year, w.month, w.day, schedule.hours[i])
            else:
                w = _next_midnight(w)
        elif w.minute not in schedule.minutes:
            i = bisect.bisect_right(schedule.minutes, w.minute)
            if i < len(schedule.minutes):
                w = datetime(w.year, w.month, w.day, w.hour, schedule.minutes[i])
            else:
                w = datetime(w.year, w.month, w.day, w.hour) + ONE_HOUR
        else:
            return w
    return None


def _next_midnight(w):
    return datetime(w.year, w.month, w.day) + ONE_DAY


def _first_of_next_month(w):
    if w.month == 12:
        return datetime(w.year + 1, 1, 1)
    return datetime(w.year, w.month + 1, 1)


def _naive(t):
    return datetime.combine(t.date(), t.time())  # replace() is slow on this hot path


def _cron_next(schedule, zone, after, limit):
    """The first fire instant strictly after `after` (calendar ignored), or None past `limit`."""
    # The next whole minute (arithmetic: replace() is slow on this hot path).
    t = after - timedelta(seconds=after.second, microseconds=after.microsecond) + ONE_MINUTE
    while t <= limit:
        if schedule.fixed_time:
            tr = last_transition(zone, t)
            if tr is not None:
                moved = _fixed_time_border(schedule, tr, t)
                if moved == t:
                    return t
                if moved is not None:
                    t = moved
                    continue
        offset = t.astimezone(zone).utcoffset()
        end = min(segment_end(zone, t), limit + ONE_MINUTE)
        # Inside [t, end) the wall time is UTC + offset, a plain bijection.
        found = _next_wall_match(schedule, _naive(t + offset), _naive(end + offset) - ONE_MINUTE)
        if found is not None:
            return as_utc(found) - offset
        t = end
    return None


def _fixed_time_border(schedule, transition, t):
    """Apply the Debian rule at the last transition before t, for fixed-time jobs.

    Returns t when t is the end of a gap that swallowed a wall time due, the
    end of a repeated stretch when t lies inside one, or None (nothing to do).
    """
    at, before, after = transition
    if after > before and at == t:
        skipped_from = _naive(at + before)
        skipped_to = _naive(at + after) - ONE_MINUTE
        if _next_wall_match(schedule, skipped_from, skipped_to) is not None:
            return t
    if after < before and t < at + (before - after):
        return at + (before - after)  # these wall times already had their firing
    return None


def _raw_next(schedule, zone, after, limit, anchor):
    """The first fire instant > after, calendar ignored. `@every` counts from anchor."""
    if schedule.every is None:
        return _cron_next(schedule, zone, after, limit)
    steps = (after - anchor) // schedule.every + 1
    found = anchor + steps * schedule.every
    return found if found <= limit else None


# --- business days -------------------------------------------------------------
#
# `@business_day N HH:MM` fires on the Nth day of each month that the job's
# calendar allows (N < 0 counts from the month's end; Monday to Friday
# without a calendar), at wall time HH:MM in the job's timezone. A day counts
# when the calendar allows any instant of it, as the admin's month grid shows
# it (`CalendarRules.day_allowed`: weekdays, holidays, blackouts, include
# periods, base calendars, and a daily window that DST leaves somewhere on
# the day). Days are dates: the calendar judges the date, the job's timezone
# places HH:MM on it. The instant is then gated by the calendar like any
# other (skip or defer), so a daily window that closes before HH:MM makes the
# occurrence skip to the next month or defer to the next window.

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

    def nth_day(self, calendar, year, month):
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

    def describe(self):
        which = "last" if self.n == -1 else _ordinal(abs(self.n))
        if self.n < -1:
            which += "-to-last"
        return f"On the {which} business day of the month at {self.at:%H:%M}"


def _parse_business_day(text):
    parts = text.split(" ")
    if parts[0].lower() != "@business_day":
        raise ScheduleError(f"unknown macro {parts[0]!r}: {BUSINESS_DAY_USAGE}")
    if len(parts) != 3:
        missing = "the day number" if ":" in parts[-1] else "the time"
        problem = {1: "the day number and the time are missing", 2: f"{missing} is missing"}
        what = problem.get(len(parts), "it has more than a day number and a time")
        raise ScheduleError(f"{text!r}: {what}; {BUSINESS_DAY_USAGE}")
    return Schedule(
        text=text,
        business_day=BusinessDay(_day_number(text, parts[1]), _time_of_day(text, parts[2])),
    )


def _day_number(text, token):
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


def _time_of_day(text, token):
    match = TIME_OF_DAY_RE.match(token)
    hour, minute = (int(g) for g in match.groups()) if match else (-1, -1)
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        raise ScheduleError(
            f"{text!r}: time {token!r} is not a time of day: write HH:MM from 00:00 to 23:59"
        )
    return time(hour, minute)


def _business_day_check(calendar):
    if calendar is None:
        return lambda day: day.weekday() in MONDAY_TO_FRIDAY
    return calendar.day_allowed


def _next_month(year, month):
    return (year + 1, 1) if month == 12 else (year, month + 1)


def _business_day_next(business_day, zone, calendar, after, limit):
    """The first occurrence strictly after `after` (calendar gate not applied), or None."""
    # From the day before: the end of a DST gap may carry an occurrence past midnight.
    start = wall(zone, after).date() - ONE_DAY
    last = wall(zone, limit).date()
    year, month = start.year, start.month
    while date(year, month, 1) <= last:
        day = business_day.nth_day(calendar, year, month)
        if day is not None:
            # The Debian rule: the first of a repeated wall time, the gap's end for a missing one.
            instant = resolve_wall(zone, datetime.combine(day, business_day.at))
            if instant > limit:
                return None
            if instant > after:
                return instant
        year, month = _next_month(year, month)
    return None


def _business_day_fire(business_day, zone, calendar, after, policy, limit, blocked):
    """`next_fire` for `@business_day`: the next occurrence, gated by the calendar."""
    candidate = _business_day_next(business_day, zone, calendar, after, limit)
    while candidate is not None and calendar is not None:
        allowed = calendar.next_allowed(candidate, horizon=limit)
        if allowed == candidate:
            return candidate
        if blocked is not None:
            blocked.append(candidate)
        if allowed is None or policy == DEFER:
            return allowed
        candidate = _business_day_next(business_day, zone, calendar, allowed - TINY, limit)
    return candidate


def months_without_occurrence(schedule, tz, calendar, after, until, key=None):
    """For `@business_day`: the months from `after`'s to `until`'s (on the job's
    clock) with fewer allowed days than N, as [(first day, days allowed)]; []
    for other schedules (`key`: the job's name, for the H forms)."""
    schedule = parse_schedule(schedule, key=key)
    business_day = schedule.business_day
    if business_day is None:
        return []
    zone = _as_zone(tz)
    first, last = wall(zone, _as_utc(after)).date(), wall(zone, _as_utc(until)).date()
    found = []
    year, month = first.year, first.month
    while date(year, month, 1) <= last:
        if business_day.nth_day(calendar, year, month) is None:
            found.append((date(year, month, 1), len(_allowed_days(calendar, year, month))))
        year, month = _next_month(year, month)
    return found


def _allowed_days(calendar, year, month):
    if calendar is not None:
        return calendar.allowed_days(year, month)
    days = stdlib_calendar.monthrange(year, month)[1]
    return [
        d
        for d in (date(year, month, i) for i in range(1, days + 1))
        if d.weekday() in MONDAY_TO_FRIDAY
    ]


def _ordinal(n):
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# --- the public math -----------------------------------------------------------


def next_fire(
    schedule, tz, calendar, after, policy=SKIP, horizon_years=None, blocked=None, key=None
):
    """The first fire instant strictly after `after`, calendar applied, in UTC.

    `schedule` is text or a Schedule, `tz` an IANA name or ZoneInfo, `calendar`
    a CalendarRules or None. `@every` counts from `after` (pass the last
    scheduled instant). Policy `skip` moves on to the next occurrence inside
    allowed time; `defer` fires a blocked occurrence once at the first allowed
    instant after it. None when nothing fires within the horizon (5 years).
    `blocked`, a list, receives the candidates the calendar turned away on
    the way (one per blocked stretch crossed), for previews. `key`: see
    parse_schedule.
    """
    if policy not in (SKIP, DEFER):
        raise ValueError(f"unknown calendar policy {policy!r} (use skip or defer)")
    schedule = parse_schedule(schedule, key)
    zone = _as_zone(tz)
    after = _as_utc(after)
    limit = add_years(after, horizon_years or DEFAULT_HORIZON_YEARS)
    if schedule.business_day is not None:
        return _business_day_fire(
            schedule.business_day, zone, calendar, after, policy, limit, blocked
        )
    candidate = _raw_next(schedule, zone, after, limit, anchor=after)
    if candidate is None or calendar is None:
        return candidate
    if policy == DEFER:
        # Every occurrence before the next allowed instant is blocked too, so
        # they all coalesce into this one firing.
        allowed = calendar.next_allowed(candidate, horizon=limit)
        if allowed != candidate and blocked is not None:
            blocked.append(candidate)
        return allowed
    while candidate is not None:
        allowed = calendar.next_allowed(candidate, horizon=limit)
        if allowed != candidate and blocked is not None:
            blocked.append(candidate)
        if allowed is None or allowed == candidate:
            return allowed
        candidate = _raw_next(schedule, zone, allowed - TINY, limit, anchor=after)
    return None


def next_fires(schedule, tz, calendar, after, count, policy=SKIP, horizon_years=None, key=None):
    """Up to `count` consecutive fire instants after `after` (each anchored on the previous)."""
    schedule = parse_schedule(schedule, key)
    zone = _as_zone(tz)
    found = []
    while len(found) < count:
        after = next_fire(schedule, zone, calendar, after, policy, horizon_years)
        if after is None:
            break
        found.append(after)
    return found


def never_fires_reason(schedule, tz, calendar, now, horizon_years=None, policy=SKIP, key=None):
    """A sentence when the schedule never fires within the horizon, else None."""
    schedule = parse_schedule(schedule, key)
    years = horizon_years or DEFAULT_HORIZON_YEARS
    if next_fire(schedule, tz, calendar, now, policy, years) is not None:
        return None
    if calendar is None:
        return f"never fires: schedule '{schedule}' has no occurrence within {years} years"
    if calendar.next_allowed(now, horizon=add_years(to_utc(now), years)) is None:
        return f"never fires: calendar '{calendar.name}' allows no time within {years} years"
    return (
        f"never fires: schedule '{schedule}' never meets calendar '{calendar.name}' "
        f"within {years} years"
    )


def describe(schedule, key=None):
    """The schedule in words, e.g. "At 02:30 AM" or "Every 1 hour 30 minutes"
    (`H` forms as the minute or hour they resolve to for `key`)."""
    schedule = parse_schedule(schedule, key)
    if schedule.every is not None:
        return "Every " + _describe_interval(schedule.every)
    if schedule.business_day is not None:
        return schedule.business_day.describe()
    try:
        return get_description(schedule.expression)
    except Exception:  # a describer gap must not break a page; the text still says it
        return schedule.expression


def _describe_interval(interval):
    seconds = int(interval.total_seconds())
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
    return " ".join(parts)


def _as_utc(t):
    if not isinstance(t, datetime) or t.tzinfo is None:
        raise ValueError("`after` must be a timezone-aware datetime")
    return t.astimezone(UTC)
