"""The job model and its rules: schedules and their fire times, previews,
calendars and chains as they bear on a job, its health record."""
