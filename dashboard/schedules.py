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
    """The schedule in words, or the raw schedule when it cannot be read."""
    return describe_schedule(job.schedule, job.name)


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
