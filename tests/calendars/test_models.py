"""Calendar rows: validation, rules() from the row, and the admin page."""

import json
from datetime import UTC, date, datetime, time

import pytest
import time_machine
from django.core.exceptions import ValidationError

from calendars.models import Calendar, CalendarPeriod
from calendars.rules import RulesError, get_zone
from tests.admin_forms import calendar_form
from tests.factories import CalendarFactory, CalendarPeriodFactory, JobFactory

BERLIN = get_zone("Europe/Berlin")
WORKDAYS = ["mon", "tue", "wed", "thu", "fri"]


def errors_of(instance):
    with pytest.raises(ValidationError) as caught:
        instance.full_clean()
    return caught.value.message_dict


@pytest.mark.django_db
def test_rules_come_from_the_row_its_periods_and_its_base():
    base = CalendarFactory(name="workdays", timezone="Europe/Berlin", weekdays=WORKDAYS)
    calendar = CalendarFactory(
        name="office",
        timezone="Europe/Berlin",
        base=base,
        holiday_country="DE",
        holiday_subdivision="BY",
        window_start=time(6),
        window_end=time(22),
    )
    CalendarPeriodFactory(calendar=calendar, label="Christmas freeze")
    CalendarPeriodFactory(
        calendar=calendar,
        kind=CalendarPeriod.EXCLUDE,
        start_date=None,
        end_date=None,
        start_at=datetime(2027, 1, 7, 5, 0, tzinfo=UTC),
        end_at=datetime(2027, 1, 7, 12, 0, tzinfo=UTC),
        label="migration",
    )
    rules = calendar.rules()
    assert rules.name == "office"
    assert rules.base.name == "workdays"
    assert rules.day_status(date(2026, 12, 28)) == (False, "Christmas freeze")
    assert rules.next_allowed(datetime(2026, 12, 23, 21, 0, tzinfo=UTC)) == datetime(
        2027, 1, 7, 12, 0, tzinfo=UTC
    )


def test_unsaved_calendar_builds_rules_without_periods():
    rules = Calendar(name="draft", timezone="Asia/Tokyo", weekdays=["sat"]).rules()
    assert rules.weekdays == frozenset({5})


@pytest.mark.django_db
@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"timezone": "Europe/Berln"}, "timezone", "'Europe/Berln' is not a known IANA timezone"),
        ({"holiday_country": "XX"}, "holiday_country", "'XX' is not a holiday country"),
        (
            {"holiday_country": "DE", "holiday_subdivision": "XY"},
            "holiday_subdivision",
            "'XY' is not a subdivision of DE",
        ),
        ({"holiday_subdivision": "BY"}, "holiday_subdivision", "needs a country"),
        (
            {"holiday_country": "DE", "holiday_categories": ["bank-ish"]},
            "holiday_categories",
            "are not supported for DE",
        ),
        ({"weekdays": []}, "weekdays", "allow at least one weekday"),
        ({"weekdays": ["mon", "sunday"]}, "weekdays", "unknown weekdays ['sunday']"),
        ({"weekdays": "mon"}, "weekdays", "must be a list of day names"),
        (
            {"window_start": time(8), "window_end": time(8)},
            "window_end",
            "daily window starts and ends at 08:00",
        ),
        ({"window_start": time(8)}, "window_end", "needs both a start and an end"),
        ({"holiday_categories": "public"}, "holiday_categories", "must be a list of names"),
    ],
)
def test_bad_calendar_is_refused_with_a_clear_message(fields, field, message):
    calendar = Calendar(name="bad", **fields)
    assert message in " ".join(errors_of(calendar)[field])


@pytest.mark.django_db
def test_base_cycle_is_refused():
    a = CalendarFactory(name="a")
    b = CalendarFactory(name="b", base=a)
    a.base = b
    assert "form a cycle through 'a'" in errors_of(a)["base"][0]


@pytest.mark.django_db
def test_period_starting_after_it_ends_is_refused():
    calendar = CalendarFactory()
    period = CalendarPeriod(
        calendar=calendar, start_date=date(2027, 1, 6), end_date=date(2026, 12, 24)
    )
    assert "starts (2027-01-06) after it ends (2026-12-24)" in errors_of(period)["end_date"][0]
    instants = CalendarPeriod(
        calendar=calendar,
        start_at=datetime(2027, 1, 6, tzinfo=UTC),
        end_at=datetime(2027, 1, 6, tzinfo=UTC),
    )
    assert "after it ends" in errors_of(instants)["end_at"][0]


@pytest.mark.django_db
def test_period_mixing_dates_and_times_is_refused():
    period = CalendarPeriod(
        calendar=CalendarFactory(),
        start_date=date(2027, 1, 6),
        end_date=date(2027, 1, 7),
        start_at=datetime(2027, 1, 6, tzinfo=UTC),
    )
    assert "not both" in errors_of(period)["__all__"][0]


@pytest.mark.django_db
def test_admin_change_page_shows_preview_and_month_grid(client, admin_user):
    calendar = CalendarFactory(
        name="de-by-workdays",
        timezone="Europe/Berlin",
        weekdays=WORKDAYS,
        holiday_country="DE",
        holiday_subdivision="BY",
    )
    CalendarPeriodFactory(calendar=calendar, label="Christmas freeze")
    with time_machine.travel(datetime(2026, 12, 10, 12, 0, tzinfo=UTC), tick=False):
        client.force_login(admin_user)
        page = client.get(f"/admin/calendars/calendar/{calendar.pk}/change/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Allowed days, next 3 months (Europe/Berlin)" in html
    assert "December 2026" in html and "February 2027" in html
    assert "Christmas freeze" in html and "Epiphany" in html  # a holiday is named first
    assert "weekend" in html
    assert "2026-12-10 13:00:00 CET until 2026-12-12 00:00:00 CET" in html


@pytest.mark.django_db
def test_admin_saves_a_calendar_with_periods_inline(admin_client):
    form = calendar_form(**{"periods-0-end_date": "2026-12-20"})
    page = admin_client.post("/admin/calendars/calendar/add/", form)
    assert page.status_code == 200  # refused: the period runs backwards
    assert "after it ends" in page.content.decode()
    form["periods-0-end_date"] = "2027-01-06"
    page = admin_client.post("/admin/calendars/calendar/add/", form)
    assert page["Location"] == "/admin/calendars/calendar/"
    assert Calendar.objects.get(name="ops").periods.get().label == "freeze"


@pytest.mark.django_db
def test_admin_changelist_shows_the_rules_in_short(admin_client):
    CalendarFactory(
        name="de-by-workdays",
        weekdays=WORKDAYS,
        holiday_country="DE",
        holiday_subdivision="BY",
        window_start=time(6),
        window_end=time(22),
    )
    html = admin_client.get("/admin/calendars/calendar/").content.decode()
    assert "mon, tue, wed, thu, fri" in html
    assert "DE-BY" in html and "06:00-22:00" in html


@pytest.mark.django_db
def test_saving_a_calendar_in_the_admin_reschedules_its_jobs(client, admin_user):
    calendar = CalendarFactory(name="ops", timezone="UTC")
    job = JobFactory(schedule="0 9 * * *", calendar=calendar)
    form = {
        "name": "ops",
        "description": "",
        "timezone": "UTC",
        "weekdays": json.dumps(calendar.weekdays),
        "holiday_country": "",
        "holiday_subdivision": "",
        "holiday_categories": "[]",
        "window_start": "",
        "window_end": "",
        "base": "",
        "periods-TOTAL_FORMS": "1",
        "periods-INITIAL_FORMS": "0",
        "periods-MIN_NUM_FORMS": "0",
        "periods-MAX_NUM_FORMS": "1000",
        "periods-0-kind": "exclude",
        "periods-0-label": "freeze",
        "periods-0-start_date": "2026-12-21",
        "periods-0-end_date": "2027-01-06",
    }
    with time_machine.travel(datetime(2026, 12, 20, 12, 0, tzinfo=UTC), tick=False):
        client.force_login(admin_user)  # a session from before the jump would have expired
        page = client.post(f"/admin/calendars/calendar/{calendar.pk}/change/", form)
    assert page.status_code == 302
    assert page["Location"] == "/admin/calendars/calendar/"
    job.refresh_from_db()
    assert job.next_run_at == datetime(2027, 1, 7, 9, 0, tzinfo=UTC)


@pytest.mark.django_db
def test_rules_refuse_a_base_cycle_stored_behind_validation():
    a = CalendarFactory(name="a")
    b = CalendarFactory(name="b", base=a)
    Calendar.objects.filter(pk=a.pk).update(base=b)
    a.refresh_from_db()
    with pytest.raises(RulesError, match="calendar 'a' is its own base"):
        a.rules()
