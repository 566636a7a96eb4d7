"""The capacity forecast of jobs with several schedules, one-shot instants,
bounds or a run limit (docs/design.md §14): the instants it counts are
`Job.upcoming`'s, and its steady rate past the cap stops at the job's end."""

import datetime as dt

import pytest

from calendars.rules import CalendarRules
from scheduler.forecast import JobLoad, RunnerSlots, forecast_load, job_loads
from scheduler.forecast.core import Window
from scheduler.models import Job

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.UTC)  # a Friday
HOUR = dt.timedelta(hours=1)
LINUX = RunnerSlots("linux-1", frozenset({"linux"}), 1)


def stored(**fields):
    job = Job(name=fields.pop("name"), command="true", labels=["linux"], **fields)
    job.full_clean()
    job.reschedule(NOW)
    job.save()
    return job


def test_the_forecast_counts_the_instants_the_preview_shows():
    until = NOW + 24 * HOUR
    jobs = [
        stored(
            name="union",
            schedule="0 */6 * * *",
            schedules=[{"cron": "30 13 * * *", "timezone": "Europe/Berlin"}],
            at=["2026-12-04T15:45:00Z"],
            not_after=NOW + 20 * HOUR,
        ),
        stored(name="limited", schedule="*/10 * * * *", max_runs=7, jitter=60),
        stored(name="later", schedule="@every 40m", not_before=NOW + 5 * HOUR),
        stored(name="plain", schedule="0 * * * *"),
    ]
    loads = {load.name: load for load in job_loads(until)}
    for job in jobs:
        expected = [t for t in job.upcoming(NOW, 500) if t < until]
        assert list(loads[job.name].fires(NOW)) == expected, job.name
    assert len(list(loads["limited"].fires(NOW))) == 7
    assert [load.key for load in loads.values() if load.name != "plain"] == [None] * 3


def test_a_job_with_only_schedules_or_instants_is_forecast_and_one_on_register_is_not():
    stored(name="two", schedule="", schedules=["0 13 * * *", "0 14 * * *"])
    stored(name="once", schedule="", at=["2026-12-04T16:00:00Z"])
    stored(name="boot", schedule="", run_on_register=True)
    assert sorted(load.name for load in job_loads(NOW + 24 * HOUR)) == ["once", "two"]


def test_a_completed_job_is_not_forecast():
    job = stored(name="done", schedule="0 * * * *", max_runs=1)
    Job.objects.filter(pk=job.pk).update(scheduled_runs=1, enabled=False)
    assert job_loads(NOW + 24 * HOUR) == []


def test_the_steady_rate_past_the_cap_stops_at_not_after_and_at_the_last_run():
    def every_minute(after):
        instant = after - dt.timedelta(seconds=after.second, microseconds=after.microsecond)
        while True:
            instant += dt.timedelta(minutes=1)
            yield instant

    common = {"labels": ("linux",), "seconds": 30.0, "fires": every_minute}
    bounded = JobLoad("bounded", ends=NOW + 2 * HOUR, **common)
    limited = JobLoad("limited", runs=240, **common)  # four hours of runs
    for load, hours in ((bounded, 2), (limited, 4)):
        demand = forecast_load(NOW, [load], [LINUX], hours=6, cap=60).label_sets[0].demand
        assert sum(demand[: hours * 4]) == pytest.approx(hours * 4 * 0.5, rel=0.02)
        assert demand[hours * 4 :] == [0.0] * (24 - hours * 4), load.name


def test_without_bounds_the_rest_runs_to_the_windows_end():
    window = Window(NOW, 4, 900.0)
    assert window.rest_until(JobLoad("x", (), 1.0, iter), 10.0, 1.0, 5) == float("inf")


def test_a_union_on_a_calendar_that_allows_nothing_forecasts_no_run():
    calendar = CalendarRules(timezone="UTC", weekdays=(), name="never")
    job = Job(name="union", schedule="0 * * * *", schedules=["30 * * * *"], calendar_id=1)
    from scheduler.forecast.fires import WithinWindow, job_fires

    job._calendar_rules = (1, WithinWindow(calendar, NOW + 24 * HOUR))
    assert list(job_fires(job, NOW + 24 * HOUR)(NOW)) == []
