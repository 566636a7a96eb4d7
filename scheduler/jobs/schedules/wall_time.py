"""The next instant of a schedule, calendar ignored, DST-correct.

DST follows the Debian cron rule (docs/design.md §3, §14). A job runs at a
fixed time of day (Schedule.fixed_time) unless its minute field starts with
`*` or its hour field covers every hour: when that wall time occurs twice it
fires once (the first occurrence), and when it does not exist it fires right
after the gap. Any other job follows absolute time through both transitions:
every real minute whose wall time matches, so both passes of a repeated hour
and none of a skipped one. We evaluate cron on constant-offset segments of the zone (between
two transitions wall time is just UTC plus an offset) and apply the rule at
the segment borders; croniter alone fires `30 2 * * *` twice on a fall-back
day.
"""

from __future__ import annotations

import bisect
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from calendars.zones import as_utc, last_transition, segment_end
from scheduler.jobs.schedules.schedule import Schedule

ONE_MINUTE = timedelta(minutes=1)
ONE_HOUR = timedelta(hours=1)
ONE_DAY = timedelta(days=1)


def raw_next(
    schedule: Schedule, zone: ZoneInfo, after: datetime, limit: datetime, anchor: datetime
) -> datetime | None:
    """The first fire instant > after, calendar ignored. `@every` counts from anchor."""
    if schedule.every is None:
        return _cron_next(schedule, zone, after, limit)
    steps = (after - anchor) // schedule.every + 1
    found = anchor + steps * schedule.every
    return found if found <= limit else None


def _next_wall_match(schedule: Schedule, w: datetime, last: datetime) -> datetime | None:
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


def _next_midnight(w: datetime) -> datetime:
    return datetime(w.year, w.month, w.day) + ONE_DAY


def _first_of_next_month(w: datetime) -> datetime:
    if w.month == 12:
        return datetime(w.year + 1, 1, 1)
    return datetime(w.year, w.month + 1, 1)


def _naive(t: datetime) -> datetime:
    return datetime.combine(t.date(), t.time())  # replace() is slow on this hot path


def _cron_next(
    schedule: Schedule, zone: ZoneInfo, after: datetime, limit: datetime
) -> datetime | None:
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
        assert offset is not None  # an aware instant in a ZoneInfo always has one
        end: datetime = min(segment_end(zone, t), limit + ONE_MINUTE)
        # Inside [t, end) the wall time is UTC + offset, a plain bijection.
        found = _next_wall_match(schedule, _naive(t + offset), _naive(end + offset) - ONE_MINUTE)
        if found is not None:
            found_at: datetime = as_utc(found)
            return found_at - offset
        t = end
    return None


def _fixed_time_border(
    schedule: Schedule, transition: tuple[datetime, timedelta, timedelta], t: datetime
) -> datetime | None:
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
