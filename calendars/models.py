from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import models

from calendars.periods import RANGE_PROBLEM, Period, out_of_range
from calendars.rules import CalendarRules, RulesError, holiday_problem
from calendars.validators import validate_stored_text, validate_timezone
from core.ownership import Owned

WEEKDAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def all_weekdays() -> list[str]:
    return list(WEEKDAYS)


class Calendar(Owned):
    """When jobs bound to it may fire. The math lives in calendars/rules.py."""

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

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def rules(self) -> CalendarRules:
        """This calendar, its periods and its base chain as a CalendarRules value."""
        return self._rules(seen=frozenset())

    def _rules(self, seen):
        if self.pk in seen:
            raise RulesError(f"calendar {self.name!r} is its own base (a cycle)")
        periods = list(self.periods.all()) if self.pk else []
        base = self.base._rules(seen | {self.pk}) if self.base_id else None
        return self.rules_with(periods, base)

    def rules_with(
        self, periods: Iterable["CalendarPeriod"], base: CalendarRules | None
    ) -> CalendarRules:
        """CalendarRules of this calendar's fields with `periods` and the
        `base` rules given: apply checks jobs against a calendar as its
        document makes it, before anything is stored."""
        return CalendarRules(
            timezone=self.timezone,
            weekdays=self.weekdays,
            holiday_country=self.holiday_country,
            holiday_subdivision=self.holiday_subdivision,
            holiday_categories=tuple(self.holiday_categories or ()),
            window_start=self.window_start,
            window_end=self.window_end,
            exclude=tuple(p.as_period() for p in periods if p.kind == CalendarPeriod.EXCLUDE),
            include=tuple(p.as_period() for p in periods if p.kind == CalendarPeriod.INCLUDE),
            base=base,
            name=self.name,
        )

    def clean(self) -> None:
        validate_stored_text(self)  # before the checks that read the fields
        errors = {}
        for field, problem in (
            ("weekdays", self._weekdays_problem()),
            *self._holiday_problems(),
            ("window_end", self._window_problem()),
            ("base", self._base_problem()),
        ):
            if problem:
                errors[field] = problem
        if errors:
            raise ValidationError(errors)

    def _weekdays_problem(self):
        if not isinstance(self.weekdays, list) or not all(
            isinstance(d, str) for d in self.weekdays
        ):
            return 'weekdays must be a list of day names, e.g. ["mon", "tue"]'
        unknown = [d for d in self.weekdays if d not in WEEKDAYS]
        if unknown:
            return f"unknown weekdays {unknown} (use {', '.join(WEEKDAYS)})"
        if not self.weekdays:
            return "allow at least one weekday: a calendar without any never allows a job to run"
        return None

    def _holiday_problems(self):
        """(field, problem) pairs, each problem reported on the field that causes it."""
        country, subdivision = self.holiday_country, self.holiday_subdivision
        categories = self.holiday_categories or []
        if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
            return [("holiday_categories", 'must be a list of names, e.g. ["public"]')]
        if not country:
            if categories:
                # No country knows them: refused, not silently ignored.
                return [("holiday_categories", "holiday categories need a holiday country")]
            return [("holiday_subdivision", holiday_problem(country, subdivision))]
        if problem := holiday_problem(country):
            return [("holiday_country", problem)]
        if problem := holiday_problem(country, subdivision):
            return [("holiday_subdivision", problem)]
        return [("holiday_categories", holiday_problem(country, subdivision, tuple(categories)))]

    def _window_problem(self):
        start, end = self.window_start, self.window_end
        if (start is None) != (end is None):
            return "a daily window needs both a start and an end (or neither)"
        if start is not None and start == end:
            return (
                f"the daily window starts and ends at {start:%H:%M}; "
                "leave both empty to allow the whole day"
            )
        return None

    def _base_problem(self):
        """Walk the base chain: reaching this calendar again would be a cycle."""
        seen = set()
        calendar = self.base
        while calendar is not None:
            if self.pk is not None and calendar.pk == self.pk:
                return f"base calendars form a cycle through {self.name!r}"
            if calendar.pk in seen:
                return f"the base chain of {calendar.name!r} is a cycle"
            seen.add(calendar.pk)
            calendar = calendar.base
        return None


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

    def as_period(self) -> Period:
        if self.start_date is not None:
            return Period(self.start_date, self.end_date, self.label)
        return Period(self.start_at, self.end_at, self.label)

    def clean(self) -> None:
        validate_stored_text(self)
        self._validate_range()
        dates = (self.start_date, self.end_date)
        instants = (self.start_at, self.end_at)
        if any(v is not None for v in dates) and any(v is not None for v in instants):
            raise ValidationError(
                "give either start and end dates or start and end times, not both"
            )
        for start, end, field, inclusive in (
            (*dates, "end_date", True),
            (*instants, "end_at", False),
        ):
            if (start is None) != (end is None):
                raise ValidationError({field: "a period needs both a start and an end"})
            if start is not None and (start > end or (start == end and not inclusive)):
                raise ValidationError({field: f"the period starts ({start}) after it ends ({end})"})
        if all(v is None for v in dates + instants):
            raise ValidationError("a period needs start and end dates (or start and end times)")

    def _validate_range(self):
        """Each end within the years 1970 to 9000: near the ends of time, the
        calendar math (a day past the end, a zone's offset) would overflow."""
        errors = {
            field: RANGE_PROBLEM
            for field in ("start_date", "end_date", "start_at", "end_at")
            if getattr(self, field) is not None and out_of_range(getattr(self, field))
        }
        if errors:
            raise ValidationError(errors)
