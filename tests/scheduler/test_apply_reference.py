"""docs/apply.md is written from the field lists apply validates with, and
apply's errors name fields as the file writes them (`holidays.country`),
never as the model stores them (`holiday_country`)."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from scheduler.apply.document import ApplyError, apply
from scheduler.apply.reference import reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "apply.md"


def test_the_checked_in_reference_is_the_generated_one():
    out = StringIO()
    call_command("apply_reference", stdout=out)
    assert out.getvalue() == reference()
    assert DOC.read_text() == reference(), (
        "docs/apply.md is stale: run `croniq-admin apply_reference > docs/apply.md`"
    )


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("calendars", "`holidays.country`"),
        ("calendars", "`exclude[].start`"),
        ("jobs", "`calendar_policy`"),
        ("jobs", "`parameters`"),
        ("channels", "`secret`"),
        ("notify", "`failures_in_a_row`"),
        ("checks", "`period`"),
        ("checks", "`grace`"),
    ],
)
def test_each_section_lists_its_fields(section, field):
    text = reference().split(f"## `{section}:`", 1)[1].split("\n## ", 1)[0]
    assert f"| {field} |" in text


def errors_of(document):
    with pytest.raises(ApplyError) as refused:
        apply(document, now=timezone.now())
    return refused.value.errors


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("calendar", "error"),
    [
        ({"holidays": {"country": "XX"}}, "calendars[0].holidays.country: "),
        (
            {"holidays": {"country": "DE", "subdivision": "ZZ"}},
            "calendars[0].holidays.subdivision: ",
        ),
        ({"holidays": {"subdivision": "BY"}}, "calendars[0].holidays.subdivision: "),
        (
            {"holidays": {"country": "DE", "categories": ["nope"]}},
            "calendars[0].holidays.categories: ",
        ),
        ({"holidays": {"land": "DE"}}, "calendars[0].holidays: unknown field(s): land"),
        ({"daily_window": {"start": "06:00", "end": "06:00"}}, "calendars[0].daily_window.end: "),
    ],
)
def test_calendar_errors_name_the_yaml_path(calendar, error):
    [message] = errors_of({"calendars": [{"name": "office", **calendar}]})
    assert message.startswith(error), message
    assert "holiday_" not in message and "window_" not in message
