"""The admin's calendar form: weekdays and holiday categories as
checkboxes, the timezone typed with the IANA names as suggestions.

The rules are the ones `manage.py apply` checks, in its words: the
timezone's validator, and the model's `clean` (weekdays, holidays), which
a ModelForm runs on the values parsed here. Scripts that post the old JSON
('["mon", "tue"]') are still understood.
"""

import functools
import zoneinfo
from typing import Any

from django import forms

from calendars.models import WEEKDAYS, Calendar
from calendars.public_holidays import categories_by_country, country_categories, known_categories
from calendars.validators import validate_timezone
from core.admin_widgets import Checkboxes, DependentCheckboxes, NamesField, SuggestionsInput


@functools.cache
def timezone_names() -> list[str]:
    return sorted(zoneinfo.available_timezones())


class TimezoneField(forms.CharField):
    """An IANA timezone name, typed with suggestions, checked as apply checks it."""

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "An IANA timezone, e.g. Europe/Berlin or UTC.")
        super().__init__(
            max_length=64,
            validators=[validate_timezone],
            widget=SuggestionsInput(timezone_names, attrs={"placeholder": "Europe/Berlin"}),
            **kwargs,
        )


def lower_names(names: list[Any]) -> list[Any]:
    """Day names as apply reads them (`Mon` is `mon`); anything else is left
    for the model's check to name."""
    return [name.lower() if isinstance(name, str) else name for name in names]


class CalendarAdminForm(forms.ModelForm):
    timezone = TimezoneField(
        initial="UTC",
        help_text="The IANA timezone in which weekdays, holidays, windows and dates "
        "are read, e.g. Europe/Berlin.",
    )
    # Not required: an empty choice gets the model's own sentence.
    weekdays = NamesField(
        required=False,
        initial=list(WEEKDAYS),
        widget=Checkboxes("inline-choices", [(day, day.capitalize()) for day in WEEKDAYS]),
        help_text="The days on which jobs on this calendar may fire.",
    )
    holiday_categories = NamesField(
        required=False,
        widget=DependentCheckboxes(
            "columns-choices",
            depends_on="holiday_country",
            empty="Choose a holiday country (one the holidays package knows) to pick its "
            "categories.",
        ),
        help_text="Which of the country's holidays block jobs; none ticked: its public "
        "holidays. Only the categories the holiday country knows are offered.",
    )

    class Meta:
        model = Calendar
        fields = [
            "name", "description", "timezone", "weekdays", "holiday_country",
            "holiday_subdivision", "holiday_categories", "window_start", "window_end", "base",
        ]  # fmt: skip

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "holiday_categories" in self.fields:  # not when the form is only viewed
            widget = self.fields["holiday_categories"].widget
            widget.choices = [(name, name.replace("_", " ")) for name in known_categories()]
            widget.allowed = categories_by_country()
            widget.offered = set(country_categories(self.chosen_country()))

    def chosen_country(self) -> str:
        """The country the categories are offered for: the one posted, else
        the stored or initial one."""
        if self.is_bound:
            return str(self.data.get(self.add_prefix("holiday_country"), "")).strip()
        initial = self.initial.get("holiday_country") or self.instance.holiday_country
        return str(initial or "").strip()

    def clean_weekdays(self) -> list[Any]:
        return lower_names(self.cleaned_data["weekdays"])
