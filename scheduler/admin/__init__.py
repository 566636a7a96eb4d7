"""The scheduler's admin pages: jobs and executions (`jobs`), their form and
live preview, dead letters and maintenance. Django's autodiscovery imports
this package; importing each module registers its admins."""

from scheduler.admin import dead_letters, jobs, maintenance  # noqa: F401
