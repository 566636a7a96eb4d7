"""Models refuse text a database cannot store (a NUL: PostgreSQL refuses
it; a lone surrogate: not UTF-8) in their clean(), naming the field, so the
admin and every other writer that validates refuse it as apply does."""

import datetime as dt

import pytest
from django.core.exceptions import ValidationError

from calendars.models import Calendar, CalendarPeriod
from calendars.validators import text_problems
from scheduler.models import Job
from scheduler.runs.concurrency_models import ConcurrencyGroup

pytestmark = pytest.mark.django_db

NUL, SURROGATE = "a\x00b", "a\ud800b"


def refusal(instance, **exclude):
    with pytest.raises(ValidationError) as refused:
        instance.full_clean(**exclude)
    return {field: " ".join(messages) for field, messages in refused.value.message_dict.items()}


def test_text_problems_name_each_place_as_the_apply_file_does():
    value = {"env": {"OK": "x", "BAD": NUL, SURROGATE: "y"}, "labels": ["a", [NUL]]}

    assert text_problems(value) == [
        ("env.BAD", "must not contain NUL characters"),
        ("env", "the name 'a\\ud800b' must be valid Unicode text (no lone surrogates)"),
        ("labels[1][0]", "must not contain NUL characters"),
    ]
    assert text_problems({"env": {"A": "x"}, "n": 3, "labels": ["é", "😀"]}) == []


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"command": NUL}, "command", "must not contain NUL characters"),
        ({"description": SURROGATE}, "description", "must be valid Unicode text"),
        ({"env": {"REGION": NUL}}, "env", "REGION: must not contain NUL characters"),
        ({"labels": ["linux", SURROGATE]}, "labels", "[1]: must be valid Unicode text"),
        ({"name": NUL}, "name", "must not contain NUL characters"),
    ],
)
def test_a_job_with_unstorable_text_is_invalid(fields, field, message):
    job = Job(**{"name": "report", "schedule": "@hourly", "command": "true", **fields})
    assert message in refusal(job)[field]


def test_a_calendar_and_its_periods_with_unstorable_text_are_invalid():
    calendar = Calendar(name="office", description=NUL, holiday_categories=[SURROGATE])
    period = CalendarPeriod(
        kind=CalendarPeriod.EXCLUDE,
        start_date=dt.date(2027, 1, 1),
        end_date=dt.date(2027, 1, 2),
        label=NUL,
    )

    found = refusal(calendar)

    assert found["description"] == "must not contain NUL characters"
    assert found["holiday_categories"].startswith("[0]: must be valid Unicode text")
    assert refusal(period, exclude=["calendar"]) == {"label": "must not contain NUL characters"}


def test_a_concurrency_group_with_unstorable_text_is_invalid():
    group = ConcurrencyGroup(name="reports", max_concurrent=2, description=NUL)
    assert refusal(group) == {"description": "must not contain NUL characters"}
