"""The five cron fields: numbers, names, ranges, steps, and the Quartz day
forms (day-of-month L, LW, 15W; day-of-week 5L, 1#2, names too: fri#2)."""

from __future__ import annotations

import re

from scheduler.jobs.schedules.errors import ScheduleError
from scheduler.jobs.schedules.hashed import hashed_values
from scheduler.jobs.schedules.schedule import LAST, MonthDayForm, WeekdayForm

MONTH_NAMES = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DOW_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# (name, lowest, highest, names for the lowest values on)
FIELDS: list[tuple[str, int, int, list[str] | None]] = [
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day-of-month", 1, 31, None),
    ("month", 1, 12, MONTH_NAMES),
    ("day-of-week", 0, 7, DOW_NAMES),
]
NEAREST_WEEKDAY_RE = re.compile(r"^(\d+)W$", re.IGNORECASE)
NTH_WEEKDAY_RE = re.compile(r"^([a-z0-9]+)(?:#(\d+)|(L))$", re.IGNORECASE)
Form = MonthDayForm | WeekdayForm


def parse_field(
    text: str, name: str, lo: int, hi: int, names: list[str] | None, key: str | None = None
) -> tuple[set[int], tuple[Form, ...]]:
    """The values a field allows, and its Quartz day forms (see Schedule)."""
    found: set[int] = set()
    forms: list[Form] = []
    for item in text.split(","):
        if not item:
            raise ScheduleError(f"{name} field: empty item in {text!r}")
        if item[:1] in "hH":
            found.update(hashed_values(item, name, lo, hi, key))
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
            if name == "day-of-week" and last == 0 and first > 0:
                last = 7  # cronie: a range may end on Sunday as 0 or sun (mon-sun, 5-0)
            if first > last:
                raise ScheduleError(f"{name} field: range {base} runs backwards")
        else:
            first = _field_value(base, name, lo, hi, names)
            last = hi if slash else first  # "5/15" means from 5 to the end, every 15
        found.update(range(first, last + 1, step))
    return found, tuple(forms)


def plain(expression: str) -> str:
    """The expression without Quartz day forms, which croniter reads only in part."""
    fields = expression.split(" ")
    for i, form in ((2, _is_quartz_day), (4, _is_quartz_weekday)):
        kept = [item for item in fields[i].split(",") if not form(item)]
        fields[i] = ",".join(kept) or "*"
    return " ".join(fields)


def _is_quartz_day(item: str) -> bool:
    return item.upper() in ("L", "LW") or bool(NEAREST_WEEKDAY_RE.match(item))


def _is_quartz_weekday(item: str) -> bool:
    return bool(NTH_WEEKDAY_RE.match(item))


def _quartz_form(item: str, name: str, lo: int, hi: int, names: list[str] | None) -> Form | None:
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


def _month_day_form(item: str, upper: str, lo: int, hi: int) -> MonthDayForm | None:
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


def _weekday_form(
    item: str, upper: str, lo: int, hi: int, names: list[str] | None
) -> WeekdayForm | None:
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


def _field_value(token: str, name: str, lo: int, hi: int, names: list[str] | None) -> int:
    if token.isdigit():
        value = int(token)
        if not lo <= value <= hi:
            raise ScheduleError(f"{name} field: {value} is out of range {lo}-{hi}")
        return value
    if names and token.lower() in names:
        return names.index(token.lower()) + (lo if name == "month" else 0)
    hint = f" or a name ({', '.join(names)})" if names else ""
    raise ScheduleError(f"{name} field: {token!r} is not a number in {lo}-{hi}{hint}")
