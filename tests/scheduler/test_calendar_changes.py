"""Jobs follow their calendars: a calendar saved in the admin moves the next
fire time of the jobs on it, and on calendars based on it."""

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from calendars.changes import calendar_changed
from calendars.models import Calendar
from scheduler.firing import ticks
from scheduler.jobs.calendar_changes import jobs_on_calendars
from scheduler.models import Job
from tests import admin_forms
from tests.factories import CalendarFactory, JobFactory

pytestmark = pytest.mark.django_db

MONDAY, WEDNESDAY = 0, 2


def job_on(calendar):
    job = JobFactory(schedule="0 12 * * *", timezone="UTC", calendar=calendar)
    job.reschedule(timezone.now())
    job.save()
    return job


def test_a_calendar_saved_in_the_admin_reschedules_the_jobs_on_it_and_on_those_based_on_it(
    admin_client,
):
    ops = CalendarFactory(name="ops", weekdays=["mon"])
    derived = CalendarFactory(base=ops)
    other = CalendarFactory(weekdays=["mon"])
    direct, indirect, elsewhere = job_on(ops), job_on(derived), job_on(other)
    assert direct.next_run_at.weekday() == indirect.next_run_at.weekday() == MONDAY
    before = elsewhere.next_run_at

    response = admin_client.post(
        reverse("admin:calendars_calendar_change", args=[ops.pk]),
        admin_forms.calendar_form(name="ops", weekdays='["wed"]'),
    )

    assert response.status_code == 302, response.content[:2000]
    for job in (direct, indirect, elsewhere):
        job.refresh_from_db()
    assert direct.next_run_at.weekday() == WEDNESDAY
    assert indirect.next_run_at.weekday() == WEDNESDAY
    assert elsewhere.next_run_at == before


def test_the_scheduler_listens_for_calendar_changes():
    ops = CalendarFactory(weekdays=["mon"])
    job = job_on(ops)
    assert job.next_run_at.weekday() == MONDAY
    Calendar.objects.filter(pk=ops.pk).update(weekdays=["wed"])
    ops.refresh_from_db()

    calendar_changed.send(sender=Calendar, calendar=ops)

    job.refresh_from_db()
    assert job.next_run_at.weekday() == WEDNESDAY
    assert list(jobs_on_calendars([ops.pk])) == [job]


def test_a_calendar_change_moves_the_jobs_edit_marker_a_resting_loop_compares():
    # On SQLite a sleeping loop learns of a job edit from this marker (a MAX
    # over updated_at): a recomputed next instant that left it alone would
    # wait for the loop's next read of the earliest due job (up to 30 s).
    ops = CalendarFactory(weekdays=["mon"])
    job_on(ops)
    Job.objects.update(updated_at=timezone.now() - dt.timedelta(hours=1))
    before = ticks.last_job_edit()
    Calendar.objects.filter(pk=ops.pk).update(weekdays=["wed"])
    ops.refresh_from_db()

    calendar_changed.send(sender=Calendar, calendar=ops)

    assert ticks.last_job_edit() != before
