"""The admin's calendar form: weekday and holiday category checkboxes and
a typed timezone, refused in the words `manage.py apply` uses."""

import datetime as dt
import html
import json
import re

import pytest
from django.urls import reverse
from django.utils.datastructures import MultiValueDict

from calendars.admin_forms import CalendarAdminForm
from calendars.models import Calendar
from scheduler.apply.document import apply
from scheduler.apply.items import ApplyError
from tests.admin_forms import calendar_form
from tests.factories import CalendarFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 3, 2, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client


def form_of(**fields):
    payload = calendar_form(**fields)
    data = MultiValueDict({k: v if isinstance(v, list) else [v] for k, v in payload.items()})
    form = CalendarAdminForm(data=data)
    form.is_valid()
    return form


def apply_says(path, **item):
    """apply's error for a calendar with `item`'s fields, without the item
    and the field's YAML `path` in front."""
    with pytest.raises(ApplyError) as refused:
        apply({"calendars": [{"name": "ops", **item}]}, now=NOW, dry_run=True)
    [error] = refused.value.errors
    assert error.startswith(f"calendars[0].{path}: ")
    return error.removeprefix(f"calendars[0].{path}: ")


def checkboxes(answer, name):
    """{value: ticked} of the checkboxes named `name` on a page."""
    inputs = re.findall(rf'<input type="checkbox" name="{name}"[^>]*>', answer.content.decode())
    return {re.search(r'value="([^"]*)"', tag)[1]: " checked" in tag for tag in inputs}


# -- weekdays ------------------------------------------------------------------


@pytest.mark.parametrize(
    "posted",
    [
        ["mon", "tue"],  # two ticked checkboxes
        "mon,tue",
        "Mon, Tue",
        '["mon", "tue"]',  # the JSON the form took before
    ],
)
def test_weekdays_are_read_from_checkboxes_or_text(posted):
    form = form_of(weekdays=posted)
    assert form.errors == {}
    assert form.cleaned_data["weekdays"] == ["mon", "tue"]


def test_an_unknown_weekday_is_refused_as_apply_refuses_it():
    form = form_of(weekdays="mon,funday")
    assert form.errors["weekdays"] == [apply_says("weekdays", weekdays=["mon", "funday"])]
    assert "unknown weekdays ['funday']" in form.errors["weekdays"][0]


def test_no_weekday_is_refused_as_apply_refuses_it():
    form = form_of(weekdays=[])
    assert form.errors["weekdays"] == [
        "allow at least one weekday: a calendar without any never allows a job to run"
    ]
    assert form.errors["weekdays"][0] in apply_says("weekdays", weekdays=[])


def test_ticked_weekdays_round_trip_through_the_admin(staff):
    answer = staff.post(
        reverse("admin:calendars_calendar_add"), calendar_form(weekdays=["mon", "tue"])
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    calendar = Calendar.objects.get(name="ops")
    assert calendar.weekdays == ["mon", "tue"]
    page = staff.get(reverse("admin:calendars_calendar_change", args=[calendar.pk]))
    assert checkboxes(page, "weekdays") == {
        "mon": True, "tue": True, "wed": False, "thu": False, "fri": False, "sat": False,
        "sun": False,
    }  # fmt: skip


def test_typing_weekdays_never_asks_for_json(staff):
    answer = staff.post(reverse("admin:calendars_calendar_add"), calendar_form(weekdays="mon,tue"))
    assert answer.status_code == 302
    assert Calendar.objects.get(name="ops").weekdays == ["mon", "tue"]


# -- holiday categories ------------------------------------------------------------


def test_the_holiday_categories_are_the_ones_the_holidays_package_knows():
    choices = dict(CalendarAdminForm().fields["holiday_categories"].widget.choices)
    assert {"public", "school", "bank", "half_day"} <= set(choices)


def test_a_ticked_category_is_kept():
    form = form_of(holiday_country="DE", holiday_categories=["public", "school"])
    assert form.errors == {}
    assert form.cleaned_data["holiday_categories"] == ["public", "school"]


def test_a_category_the_country_lacks_is_refused_as_apply_refuses_it():
    form = form_of(holiday_country="DE", holiday_categories=["half_day"])
    holidays = {"country": "DE", "categories": ["half_day"]}
    assert form.errors["holiday_categories"] == [
        apply_says("holidays.categories", holidays=holidays)
    ]


def test_stored_categories_are_ticked_on_the_change_form(staff):
    calendar = CalendarFactory(holiday_country="DE", holiday_categories=["school"])
    page = staff.get(reverse("admin:calendars_calendar_change", args=[calendar.pk]))
    boxes = checkboxes(page, "holiday_categories")
    assert boxes["school"] is True
    assert boxes["public"] is False


def offered(answer, name):
    """The values of the checkboxes named `name` the page shows (not `hidden`)."""
    choices = re.findall(r'<div data-choice="([^"]*)"( hidden)?>', answer.content.decode())
    return {value for value, hidden in choices if not hidden}


def test_the_change_form_offers_only_the_countrys_categories(staff):
    calendar = CalendarFactory(holiday_country="DE")
    page = staff.get(reverse("admin:calendars_calendar_change", args=[calendar.pk]))
    assert offered(page, "holiday_categories") == {"catholic", "public", "school"}


def test_a_stored_category_the_country_lacks_is_still_shown_ticked(staff):
    calendar = CalendarFactory(holiday_country="DE")
    Calendar.objects.filter(pk=calendar.pk).update(holiday_categories=["half_day"])
    page = staff.get(reverse("admin:calendars_calendar_change", args=[calendar.pk]))
    assert offered(page, "holiday_categories") == {"catholic", "public", "school", "half_day"}
    assert checkboxes(page, "holiday_categories")["half_day"] is True


def test_without_a_country_no_category_is_offered(staff):
    page = staff.get(reverse("admin:calendars_calendar_add"))
    assert offered(page, "holiday_categories") == set()
    assert "Choose a holiday country" in page.content.decode()


def test_a_refused_post_offers_the_posted_countrys_categories(staff):
    answer = staff.post(
        reverse("admin:calendars_calendar_add"),
        calendar_form(holiday_country="US", holiday_categories=["school"]),
    )
    assert answer.status_code == 200
    assert offered(answer, "holiday_categories") == {
        "government", "half_day", "public", "unofficial", "school"
    }  # fmt: skip
    assert "not supported for US" in answer.content.decode()
    assert not Calendar.objects.filter(name="ops").exists()


def test_the_page_carries_every_countrys_categories_for_the_script(staff):
    page = staff.get(reverse("admin:calendars_calendar_add")).content.decode()
    allowed = json.loads(html.unescape(re.search(r'data-allowed="([^"]*)"', page)[1]))
    assert allowed["DE"] == ["catholic", "public", "school"]
    assert 'data-depends-on="id_holiday_country"' in page


def test_categories_without_a_country_are_refused():
    form = form_of(holiday_country="", holiday_categories=["public"])
    assert form.errors["holiday_categories"] == ["holiday categories need a holiday country"]


# -- timezone ------------------------------------------------------------------------


def test_an_unknown_timezone_is_refused_as_apply_refuses_it():
    form = form_of(timezone="Europe/Atlantis")
    assert form.errors["timezone"] == [apply_says("timezone", timezone="Europe/Atlantis")]


def test_the_calendar_timezone_suggests_the_iana_names(staff):
    page = staff.get(reverse("admin:calendars_calendar_add")).content.decode()
    assert '<datalist id="id_timezone_options">' in page
    assert '<option value="Asia/Tokyo">' in page
