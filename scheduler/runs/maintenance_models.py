"""Maintenance rows: the global switch and the scheduled windows.

The rules that read them (what a window covers, when it is active) are in
`scheduler.runs.maintenance`; these are the stored facts only.
"""

from django.core.exceptions import ValidationError
from django.db import models


def no_labels() -> list[str]:
    return []


class MaintenanceSwitch(models.Model):
    """The global switch: one row (pk 1), on or off, for every job."""

    PK = 1

    on = models.BooleanField(
        default=False, help_text="While on, runners claim no new work and occurrences are skipped."
    )
    reason = models.CharField(max_length=200, blank=True, help_text="Why, shown in the banner.")
    changed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "maintenance switch"
        verbose_name_plural = "maintenance switch"

    def __str__(self):
        return "maintenance: on" if self.on else "maintenance: off"


class MaintenanceWindow(models.Model):
    """A planned maintenance, [start, end), for every job or only for jobs
    carrying one of `labels`."""

    start = models.DateTimeField(help_text="First instant of the window.")
    end = models.DateTimeField(help_text="End of the window, exclusive.")
    labels = models.JSONField(
        default=no_labels,
        blank=True,
        help_text="Only jobs carrying one of these labels; empty: every job.",
    )
    reason = models.CharField(max_length=200, blank=True, help_text="Why, shown in the banner.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["start", "pk"]
        indexes = [
            # Each claim and fire reads "windows not yet ended": end > now.
            models.Index(fields=["end"], name="maintenance_window_end"),
        ]
        constraints = [
            # A window that ends before it starts would cover nothing.
            models.CheckConstraint(
                condition=models.Q(end__gt=models.F("start")), name="maintenance_window_ordered"
            ),
        ]

    def __str__(self) -> str:
        return f"maintenance {self.start:%Y-%m-%d %H:%M} to {self.end:%Y-%m-%d %H:%M}"

    def clean(self) -> None:
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValidationError({"end": "must be after start: a window is [start, end)"})
        if not isinstance(self.labels, list) or not all(
            isinstance(v, str) and v for v in self.labels
        ):
            raise ValidationError({"labels": "a list of non-empty labels"})
