"""The one error a schedule that cannot be understood raises."""


class ScheduleError(ValueError):
    """A schedule that cannot be parsed, with a message a person understands."""
