"""AuditedModelAdmin: every admin add, change and delete is audited with the
user and a field diff. Exercised on a throwaway Calendar admin registered on
an AdminSite of this module, so the project's own admin is left alone."""

from datetime import time

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import path, reverse

from audit.audited_admin import AuditedModelAdmin
from audit.changes import diff, snapshot
from audit.models import AuditEvent
from calendars.models import Calendar, CalendarPeriod
from runners.models import RunnerToken

pytestmark = [
    pytest.mark.urls(__name__),
    # The test settings have no collected static files; whitenoise only warns.
    pytest.mark.filterwarnings("ignore:No directory at:UserWarning"),
]

site = admin.AdminSite(name="audited")


class PeriodInline(admin.TabularInline):
    model = CalendarPeriod
    fields = ["kind", "label", "start_date", "end_date"]
    extra = 0


class CalendarAdmin(AuditedModelAdmin):
    fields = ["name", "timezone", "weekdays", "description", "window_start", "window_end"]
    inlines = [PeriodInline]
    audit_exclude = ["description"]


site.register(Calendar, CalendarAdmin)
urlpatterns = [path("audited-admin/", site.urls)]

INLINE = "periods"


@pytest.fixture
def operator(client, db):
    user = get_user_model().objects.create_superuser("alice", password=None)
    client.force_login(user)
    return client


def form(name="workdays", timezone="Europe/Berlin", weekdays='["mon", "tue"]', **extra):
    data = {
        "name": name,
        "timezone": timezone,
        "weekdays": weekdays,
        "description": "",
        "window_start": "",
        "window_end": "",
        f"{INLINE}-TOTAL_FORMS": "0",
        f"{INLINE}-INITIAL_FORMS": "0",
        f"{INLINE}-MIN_NUM_FORMS": "0",
        f"{INLINE}-MAX_NUM_FORMS": "1000",
    }
    data.update(extra)
    return data


def calendar(**fields):
    fields.setdefault("name", "workdays")
    fields.setdefault("timezone", "Europe/Berlin")
    fields.setdefault("weekdays", ["mon", "tue"])
    return Calendar.objects.create(**fields)


def events(action):
    return list(AuditEvent.objects.filter(action=action))


def test_adding_records_created_with_the_user_and_the_new_values(operator):
    answer = operator.post(reverse("audited:calendars_calendar_add"), form())
    assert answer.status_code == 302
    [event] = events("calendar.created")
    created = Calendar.objects.get()
    assert (event.actor_kind, event.actor_name) == ("user", "alice")
    assert (event.target_type, event.target_id) == ("calendars.calendar", str(created.pk))
    assert event.data["name"] == [None, "workdays"]
    assert event.data["weekdays"] == [None, ["mon", "tue"]]
    assert "created_at" not in event.data
    assert "id" not in event.data


def test_changing_records_only_the_changed_fields_as_old_and_new(operator):
    existing = calendar()
    url = reverse("audited:calendars_calendar_change", args=[existing.pk])
    answer = operator.post(url, form(timezone="UTC", window_start="06:00", window_end="22:00"))
    assert answer.status_code == 302
    [event] = events("calendar.changed")
    assert event.actor_name == "alice"
    assert event.data == {
        "timezone": ["Europe/Berlin", "UTC"],
        "window_start": [None, "06:00:00"],
        "window_end": [None, "22:00:00"],
    }


def test_saving_without_changes_records_nothing(operator):
    existing = calendar()
    url = reverse("audited:calendars_calendar_change", args=[existing.pk])
    assert operator.post(url, form()).status_code == 302
    assert events("calendar.changed") == []


def test_excluded_fields_are_never_recorded(operator):
    existing = calendar()
    url = reverse("audited:calendars_calendar_change", args=[existing.pk])
    operator.post(url, form(description="internal notes", timezone="UTC"))
    [event] = events("calendar.changed")
    assert event.data == {"timezone": ["Europe/Berlin", "UTC"]}


def test_deleting_records_deleted_with_the_last_values(operator):
    existing = calendar()
    url = reverse("audited:calendars_calendar_delete", args=[existing.pk])
    assert operator.post(url, {"post": "yes"}).status_code == 302
    [event] = events("calendar.deleted")
    assert event.target_id == str(existing.pk)
    assert event.data["name"] == ["workdays", None]
    assert not Calendar.objects.exists()


def test_bulk_delete_records_each_deleted_object(operator):
    first, second = calendar(name="first"), calendar(name="second")
    answer = operator.post(
        reverse("audited:calendars_calendar_changelist"),
        {"action": "delete_selected", "_selected_action": [first.pk, second.pk], "post": "yes"},
    )
    assert answer.status_code == 302
    deleted = sorted(event.target_repr for event in events("calendar.deleted"))
    assert deleted == ["first", "second"]
    assert all(event.actor_name == "alice" for event in events("calendar.deleted"))


def test_inline_objects_are_audited_under_their_own_model_name(operator):
    existing = calendar()
    period = CalendarPeriod.objects.create(
        calendar=existing, label="freeze", start_date="2026-12-24", end_date="2027-01-06"
    )
    url = reverse("audited:calendars_calendar_change", args=[existing.pk])
    data = form(
        **{
            f"{INLINE}-TOTAL_FORMS": "2",
            f"{INLINE}-INITIAL_FORMS": "1",
            f"{INLINE}-0-id": str(period.pk),
            f"{INLINE}-0-calendar": str(existing.pk),
            f"{INLINE}-0-kind": "exclude",
            f"{INLINE}-0-label": "christmas freeze",
            f"{INLINE}-0-start_date": "2026-12-24",
            f"{INLINE}-0-end_date": "2027-01-06",
            f"{INLINE}-1-calendar": str(existing.pk),
            f"{INLINE}-1-kind": "exclude",
            f"{INLINE}-1-label": "summer",
            f"{INLINE}-1-start_date": "2027-08-01",
            f"{INLINE}-1-end_date": "2027-08-15",
        }
    )
    answer = operator.post(url, data)
    assert answer.status_code == 302, answer.context["errors"] if answer.context else answer
    [changed] = events("calendarperiod.changed")
    assert changed.data == {"label": ["freeze", "christmas freeze"]}
    [created] = events("calendarperiod.created")
    assert created.data["label"] == [None, "summer"]
    assert created.data["calendar"] == [None, existing.pk]


def test_an_inline_object_deleted_in_the_form_is_audited(operator):
    existing = calendar()
    period = CalendarPeriod.objects.create(
        calendar=existing, label="freeze", start_date="2026-12-24", end_date="2027-01-06"
    )
    url = reverse("audited:calendars_calendar_change", args=[existing.pk])
    data = form(
        **{
            f"{INLINE}-TOTAL_FORMS": "1",
            f"{INLINE}-INITIAL_FORMS": "1",
            f"{INLINE}-0-id": str(period.pk),
            f"{INLINE}-0-calendar": str(existing.pk),
            f"{INLINE}-0-kind": "exclude",
            f"{INLINE}-0-label": "freeze",
            f"{INLINE}-0-start_date": "2026-12-24",
            f"{INLINE}-0-end_date": "2027-01-06",
            f"{INLINE}-0-DELETE": "on",
        }
    )
    assert operator.post(url, data).status_code == 302
    [deleted] = events("calendarperiod.deleted")
    assert deleted.target_id == str(period.pk)
    assert deleted.data["label"] == ["freeze", None]
    assert not CalendarPeriod.objects.exists()


def test_the_audit_helper_records_a_custom_admin_action(operator, rf):
    existing = calendar()
    request = rf.post("/")
    request.user = get_user_model().objects.get(username="alice")
    CalendarAdmin(Calendar, site).audit(request, existing, "paused", {"why": "freeze"})
    [event] = events("calendar.paused")
    assert (event.actor_name, event.data) == ("alice", {"why": "freeze"})


def test_secret_fields_never_enter_a_snapshot():
    old = RunnerToken(name="ci", secret_hash="a" * 64)
    new = RunnerToken(name="ci-2", secret_hash="b" * 64)
    assert "secret_hash" not in snapshot(old)
    assert diff(snapshot(old), snapshot(new)) == {"name": ["ci", "ci-2"]}


def test_a_diff_of_equal_snapshots_is_empty():
    same = Calendar(name="x", window_start=time(6))
    assert diff(snapshot(same), snapshot(same)) == {}
