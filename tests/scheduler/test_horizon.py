"""CRONIQ_HORIZON_YEARS is how far ahead fire times are searched: a job whose
first fire lies beyond it "never fires" (refused, no next run); within it, fires."""

import datetime as dt
import json
from io import StringIO

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.core.management import call_command

from calendars.models import CalendarPeriod
from tests.factories import CalendarFactory, CalendarPeriodFactory, JobFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
FIRST_FIRE = dt.datetime(2032, 6, 15, 9, 0, tzinfo=dt.UTC)  # six years out


@pytest.fixture
def late_job():
    """Fires daily at 09:00, but its calendar allows time only six years from NOW."""
    calendar = CalendarFactory(name="far-future")
    CalendarPeriodFactory(
        calendar=calendar,
        kind=CalendarPeriod.INCLUDE,
        start_date=FIRST_FIRE.date(),
        end_date=FIRST_FIRE.date() + dt.timedelta(days=5),
        label="the one window",
    )
    return JobFactory(name="late", schedule="0 9 * * *", calendar=calendar, next_run_at=None)


def next_runs(*args):
    out, err = StringIO(), StringIO()
    call_command("next_runs", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_with_five_years_the_job_never_fires(late_job, settings):
    settings.CRONIQ_HORIZON_YEARS = 5
    assert late_job.next_fire_after(NOW) is None
    late_job.reschedule(NOW)
    assert late_job.next_run_at is None
    out, err = next_runs("late", "--after", NOW.isoformat(), "--json")
    assert json.loads(out) == []
    assert "within 5 years" in err


def test_with_seven_years_the_job_fires_six_years_out(late_job, settings):
    settings.CRONIQ_HORIZON_YEARS = 7
    assert late_job.next_fire_after(NOW) == FIRST_FIRE
    late_job.reschedule(NOW)
    assert late_job.next_run_at == FIRST_FIRE
    out, err = next_runs("late", "--after", NOW.isoformat(), "--count", "1", "--json")
    assert json.loads(out) == [FIRST_FIRE.isoformat()]
    assert err == ""


@pytest.mark.parametrize(("years", "refused"), [(5, True), (7, False)])
def test_saving_the_job_is_refused_only_when_it_never_fires_within_the_horizon(
    late_job, settings, years, refused
):
    settings.CRONIQ_HORIZON_YEARS = years
    with time_machine.travel(NOW, tick=False):
        if refused:
            with pytest.raises(ValidationError, match=f"within {years} years"):
                late_job.full_clean()
        else:
            late_job.full_clean()
