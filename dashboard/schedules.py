"""Schedule text and upcoming fire times for the job page.

The cron math lives in `scheduler/cron.py`; it is imported when used so the
dashboard still renders (with the raw schedule) where it is not available.
"""

from dataclasses import dataclass, field
from functools import lru_cache

from django.conf import settings


@dataclass
class Upcoming:
    times: list = field(default_factory=list)
    # Why there are no times, when there are none.
    reason: str = ""


def _cron():
    try:
        from scheduler import cron
    except ImportError:
        return None
    return cron


def describe(job):
    """The schedule in words, or the raw schedule when that is unavailable."""
    return describe_schedule(job.schedule)


@lru_cache(maxsize=4096)
def describe_schedule(schedule):
    # About a millisecond per call (cron-descriptor), and the overview shows
    # fifty at a time; schedules repeat a lot across jobs, so remember them.
    cron = _cron()
    if cron is None or not hasattr(cron, "describe"):
        return schedule
    try:
        return cron.describe(schedule)
    except ValueError:
        return schedule


def upcoming(job, now, count=10):
    cron = _cron()
    if cron is None or not hasattr(cron, "next_fires"):
        return Upcoming(reason="Fire times are not available in this version.")
    try:
        rules = job.calendar.rules() if job.calendar_id else None
        times = list(
            cron.next_fires(
                job.schedule,
                job.timezone,
                rules,
                anchor(job, now),
                count,
                job.calendar_policy,
                horizon_years=settings.CRONIQ_HORIZON_YEARS,
            )
        )
    except ValueError as e:
        return Upcoming(reason=f"Cannot compute fire times: {e}")
    if not times:
        return Upcoming(reason=never_fires_reason(cron, job, rules, now))
    return Upcoming(times=times)


def anchor(job, now):
    """`@every` schedules count from the job's last scheduled instant."""
    if job.schedule.strip().startswith("@every") and job.last_scheduled_at:
        return job.last_scheduled_at
    return now


def never_fires_reason(cron, job, rules, now):
    reason = None
    if hasattr(cron, "never_fires_reason"):
        reason = cron.never_fires_reason(
            job.schedule,
            job.timezone,
            rules,
            now,
            horizon_years=settings.CRONIQ_HORIZON_YEARS,
            policy=job.calendar_policy,
        )
    return reason or "This schedule never fires within the horizon (calendar applied)."
