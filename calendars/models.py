from django.db import models

from calendars.validators import validate_timezone

WEEKDAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def all_weekdays():
    return list(WEEKDAYS)


class Calendar(models.Model):
    """When jobs bound to it may fire. The math lives in calendars/rules.py."""

    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    timezone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[validate_timezone],
        help_text="IANA timezone in which weekdays, holidays, windows and dates are read.",
    )
    weekdays = models.JSONField(
        default=all_weekdays,
        help_text='Allowed days, e.g. ["mon", "tue", "wed", "thu", "fri"].',
    )
    holiday_country = models.CharField(
        max_length=8, blank=True, help_text="ISO country code for public holidays, e.g. DE."
    )
    holiday_subdivision = models.CharField(
        max_length=16, blank=True, help_text="Optional subdivision, e.g. BY for Bavaria."
    )
    holiday_categories = models.JSONField(
        default=list, blank=True, help_text="Optional holiday categories (default: public)."
    )
    window_start = models.TimeField(
        null=True, blank=True, help_text="Daily allowed window start (local time)."
    )
    window_end = models.TimeField(
        null=True, blank=True, help_text="Daily allowed window end, exclusive (local time)."
    )
    base = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="children",
        help_text="Optional parent calendar: an instant must be allowed by both.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class CalendarPeriod(models.Model):
    """A blackout (exclude) or an "only within" (include) period.

    Either whole dates in the calendar's timezone (start_date..end_date, end
    inclusive) or exact instants (start_at..end_at, end exclusive).
    """

    EXCLUDE = "exclude"
    INCLUDE = "include"
    KINDS = [(EXCLUDE, "exclude (blackout)"), (INCLUDE, "include (only within)")]

    calendar = models.ForeignKey(Calendar, on_delete=models.CASCADE, related_name="periods")
    kind = models.CharField(max_length=10, choices=KINDS, default=EXCLUDE)
    label = models.CharField(max_length=200, blank=True)
    start_date = models.DateField(null=True, blank=True)
    end_date = models.DateField(null=True, blank=True, help_text="Inclusive.")
    start_at = models.DateTimeField(null=True, blank=True)
    end_at = models.DateTimeField(null=True, blank=True, help_text="Exclusive.")

    class Meta:
        ordering = ["calendar", "start_date", "start_at"]
        constraints = [
            # A period is either a date range or an instant range, never half of each.
            models.CheckConstraint(
                condition=(
                    models.Q(
                        start_date__isnull=False,
                        end_date__isnull=False,
                        start_at__isnull=True,
                        end_at__isnull=True,
                    )
                    | models.Q(
                        start_date__isnull=True,
                        end_date__isnull=True,
                        start_at__isnull=False,
                        end_at__isnull=False,
                    )
                ),
                name="period_dates_or_instants",
            ),
        ]

    def __str__(self):
        start = self.start_date or self.start_at
        end = self.end_date or self.end_at
        return f"{self.kind} {start}..{end} {self.label}".strip()
