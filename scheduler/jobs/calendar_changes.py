"""Jobs follow their calendars: when a calendar (or one it is based on)
changes, the jobs on it get their next fire time again.

calendars sits below the scheduler and imports nothing from it: it sends
`calendars.changes.calendar_changed`, which `SchedulerConfig.ready` connects
to `reschedule_jobs_of`.
"""

from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from calendars.models import Calendar
from scheduler.models import Job


def jobs_on_calendars(calendar_ids: Iterable[int]) -> QuerySet:
    """Jobs on these calendars or on calendars based on them, at any depth:
    a change to a base calendar moves their fire times too."""
    calendars = frontier = set(calendar_ids)
    while frontier:
        based = Calendar.objects.filter(base__in=frontier).values_list("pk", flat=True)
        frontier = set(based) - calendars
        calendars = calendars | frontier
    return Job.objects.filter(calendar__in=calendars)


def reschedule_jobs_of(calendar: Calendar, **kwargs: Any) -> None:
    """Recompute next_run_at of jobs on this calendar or on calendars based on it."""
    now = timezone.now()
    for job in jobs_on_calendars([calendar.pk]).select_related("calendar"):
        job.reschedule(now)
        job.save(update_fields=["next_run_at", "updated_at"])
