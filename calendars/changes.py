"""Calendar changes that the apps above calendars act on.

`calendar_changed` is sent with `calendar` once a calendar and its periods
are saved (the admin); the scheduler reschedules the jobs on it
(`scheduler.jobs.calendar_changes`). calendars imports nothing above it.
"""

from django.dispatch import Signal

calendar_changed = Signal()
