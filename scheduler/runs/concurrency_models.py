"""Concurrency groups: a named budget of running executions that several
jobs share (a third-party API's rate limit, a licence count, a database
that takes four heavy reports at a time).

The budget is kept at claim time (`scheduler.runs.groups`), across every web
process; this is the stored fact only.
"""

from django.core.validators import MinValueValidator
from django.db import models

from calendars.validators import validate_stored_text
from core.ownership import Owned


class ConcurrencyGroup(Owned):
    max_concurrent = models.PositiveIntegerField(
        validators=[MinValueValidator(1)],
        help_text="At most this many executions of the group's jobs run at once.",
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(max_concurrent__gte=1), name="group_budget_positive"
            ),
        ]

    def __str__(self):
        return self.name

    def clean(self) -> None:
        validate_stored_text(self)
