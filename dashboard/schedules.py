"""Schedule text and upcoming fire times for the job page.

The fire times are `Job.upcoming`, the answer the admin and `next_runs`
give too; this module only turns errors into a sentence for the page.
"""

from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from scheduler.jobs.cron import describe as describe_text
from scheduler.models import Job

UPCOMING_SHOWN = 10


@dataclass
class Upcoming:
    times: list = field(default_factory=list)
    # Why there are no times, when there are none.
    reason: str = ""


# A job without a schedule (docs/design.md §13, run_on_register).
NO_SCHEDULE = "when a runner starts"


def describe(job: Job) -> str:
    """The schedule in words, or the raw schedule when it cannot be read;
    with its further schedules and one-shot instants (docs/design.md §14)."""
    if not (job.schedules or job.at):
        return describe_schedule(job.schedule, job.name)
    parts = [describe_schedule(job.schedule, job.name)] if job.schedule else []
    for item in job.schedules:
        text, tz = (
            (item.get("cron"), item.get("timezone")) if isinstance(item, dict) else (item, "")
        )
        words = describe_schedule(str(text), job.name)
        parts.append(f"{words} ({tz})" if tz else words)
    if job.at:
        parts.append(f"at {len(job.at)} one-shot instant{'s' if len(job.at) > 1 else ''}")
    return "; ".join(parts)


@lru_cache(maxsize=4096)
def describe_schedule(schedule: str, name: str) -> str:
    # About a millisecond per call (cron-descriptor), and the overview shows
    # fifty at a time; schedules repeat a lot across jobs, so remember them.
    if not schedule:
        return NO_SCHEDULE
    try:
        return describe_text(schedule, key=name)
    except ValueError:
        return schedule


def upcoming(job: Job, now: datetime, count: int = UPCOMING_SHOWN) -> Upcoming:
    try:
        times = job.upcoming(now, count)
        if not times:
            return Upcoming(reason=job.no_fires_reason(now))
    except ValueError as e:  # ScheduleError, RulesError: a row saved around validation
        return Upcoming(reason=f"Cannot compute fire times: {e}")
    return Upcoming(times=times)
