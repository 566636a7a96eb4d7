"""Schedule text to Schedule: five cron fields, a macro, `@every <duration>`
or `@business_day N HH:MM`; ScheduleError with a message a person
understands for anything else."""

from __future__ import annotations

import functools
import re
from datetime import timedelta
from typing import cast

from croniter import croniter

from scheduler.jobs.schedules.business_day import parse_business_day
from scheduler.jobs.schedules.errors import ScheduleError
from scheduler.jobs.schedules.fields import FIELDS, parse_field, plain
from scheduler.jobs.schedules.hashed import resolved_field, uses_key
from scheduler.jobs.schedules.schedule import MonthDayForm, Schedule, WeekdayForm

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
ONE_DAY = timedelta(days=1)
LONGEST_EVERY = timedelta(days=36500)  # a hundred years
EVERY_RE = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_schedule(text: object, key: str | None = None) -> Schedule:
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


@functools.lru_cache(maxsize=1024)  # the scheduler asks about the same few texts every tick
def _parse_text(text: str, key: str | None = None) -> Schedule:
    if not text.strip():
        raise ScheduleError("schedule is empty: use 5 cron fields, a macro or @every <duration>")
    cleaned = " ".join(text.split())
    lowered = cleaned.lower()
    if lowered.startswith("@every"):
        return _parse_every(cleaned)
    if lowered.startswith("@business_day"):
        return Schedule(text=cleaned, business_day=parse_business_day(cleaned))
    if lowered.startswith("@"):
        if lowered not in MACROS:
            known = ", ".join(sorted(MACROS))
            raise ScheduleError(
                f"unknown macro {cleaned!r} (known: {known}, @every <duration>, "
                "@business_day N HH:MM)"
            )
        return _parse_cron(MACROS[lowered], text=cleaned)
    return _parse_cron(cleaned, text=cleaned, key=key)


def _parse_every(text: str) -> Schedule:
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


def _parse_cron(expression: str, text: str, key: str | None = None) -> Schedule:
    fields = expression.split(" ")
    if len(fields) != 5:
        raise ScheduleError(
            f"schedule {text!r} has {len(fields)} fields; cron needs 5 "
            "(minute hour day-of-month month day-of-week), e.g. '30 2 * * *'"
        )
    parsed = [parse_field(f, *spec, key=key) for f, spec in zip(fields, FIELDS, strict=True)]
    (minutes, _), (hours, _), (days, day_forms), (months, _), (weekdays, weekday_forms) = parsed
    # Each day field yields only its own kind of form (fields.parse_field).
    month_days = cast(tuple[MonthDayForm, ...], day_forms)
    month_weekdays = cast(tuple[WeekdayForm, ...], weekday_forms)
    # The H forms resolved, so croniter and the describer read plain numbers.
    expression = " ".join(
        [resolved_field(minutes, fields[0]), resolved_field(hours, fields[1]), *fields[2:]]
    )
    if not croniter.is_valid(plain(expression)):  # we agree with croniter on what is cron
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
        minute_star=fields[0].startswith("*"),
        month_days=month_days,
        month_weekdays=tuple(sorted((d % 7, n) for d, n in month_weekdays)),
    )
