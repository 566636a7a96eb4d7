"""The capacity forecast: expected runs going on at once per label set, from
the jobs' real fire instants (calendars applied) and recent durations,
against the slots of the runners taking work."""

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from calendars.models import Calendar
from calendars.rules import CalendarRules
from dispatch.capacity import forecast
from runners.models import Runner
from scheduler import forecast as core
from scheduler.forecast import JobLoad, RunnerSlots, forecast_load
from scheduler.jobs.cron import ScheduleError, next_fire
from scheduler.models import Execution
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

# A Friday, on a bucket's start.
NOW = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)
LINUX = RunnerSlots("linux-1", frozenset({"linux"}), 1)


def cron(schedule, tz="UTC", calendar=None, policy="skip", counter=None):
    """A job's fire instants as `Job.fires` yields them, from scheduler.jobs.cron."""

    def fires(after):
        instant = next_fire(schedule, tz, calendar, after, policy)
        while instant is not None:
            if counter is not None:
                counter.append(instant)
            yield instant
            instant = next_fire(schedule, tz, calendar, instant, policy)

    return fires


def load(name, schedule, seconds, labels=("linux",), calendar=None, counter=None, **fields):
    """A JobLoad as `scheduler.forecast.job_loads` builds it (`@every Ns` only in seconds)."""
    every = dt.timedelta(seconds=int(schedule.split()[1][:-1])) if "@every" in schedule else None
    fires = cron(schedule, calendar=calendar, counter=counter)
    return JobLoad(name, tuple(labels), seconds, fires, every=every, calendar=calendar, **fields)


def only(result, labels=("linux",)):
    (found,) = [f for f in result.label_sets if f.labels == tuple(labels)]
    return found


# The pure core


def test_two_jobs_every_15_minutes_running_20_minutes_need_more_than_one_slot():
    jobs = [load("a", "*/15 * * * *", 20 * 60), load("b", "*/15 * * * *", 20 * 60)]
    result = forecast_load(NOW, jobs, [LINUX])
    linux = only(result)
    # Each job keeps 20/15 = 1.33 runs going; the two together 2.67.
    assert linux.demand[4:] == pytest.approx([8 / 3] * (len(linux.demand) - 4))
    assert linux.capacity == [1] * 96
    (span,) = result.spans
    assert (span.start, span.end, span.capacity, span.labels) == (
        NOW,
        NOW + dt.timedelta(hours=24),
        1,
        ("linux",),
    )
    assert span.peak == pytest.approx(8 / 3)
    assert span.slots_needed == 3


def test_one_job_every_15_minutes_running_20_minutes_keeps_1_33_runs_going():
    linux = only(forecast_load(NOW, [load("a", "*/15 * * * *", 20 * 60)], [LINUX]))
    # Runs begun before now still go on in the first bucket.
    assert linux.demand == pytest.approx([4 / 3] * 96)


def test_a_singleton_skips_the_occurrences_its_run_covers():
    jobs = [load("a", "*/15 * * * *", 20 * 60, overlap="skip")]
    linux = only(forecast_load(NOW, jobs, [LINUX]))
    # The 11:45 run (begun before now) covers 12:00, so that occurrence is
    # skipped: runs at 11:45, 12:15, 12:45, ..., each five minutes of one
    # bucket and the whole next one.
    assert linux.demand[:4] == pytest.approx([1 / 3, 1, 1 / 3, 1])
    assert sum(linux.demand[:4]) / 4 == pytest.approx(2 / 3)


def test_a_queue_keeps_to_its_slots_and_runs_the_rest_later():
    # Five runs of 30 minutes due at 03:00, two at a time: 03:00, 03:00,
    # 03:30, 03:30, 04:00.
    jobs = [load("burst", "0,1,2,3,4 3 * * *", 30 * 60, overlap="queue", max_concurrent=2)]
    result = forecast_load(NOW, jobs, [LINUX])
    linux = only(result)
    three = result.starts.index(dt.datetime(2026, 12, 5, 3, 0, tzinfo=dt.UTC))
    assert linux.demand[three : three + 6] == pytest.approx([2, 2, 2, 2, 1, 1], abs=0.07)
    assert sum(linux.demand) == pytest.approx(5 * 2)


def test_a_full_queue_skips_the_occurrences_beyond_it():
    jobs = [load("burst", "0,1,2,3,4 3 * * *", 30 * 60, overlap="queue", max_queue=1)]
    # One runs, one waits, three are skipped.
    assert sum(only(forecast_load(NOW, jobs, [LINUX])).demand) == pytest.approx(2 * 2)


def test_replace_cuts_the_live_run_short():
    jobs = [load("sync", "*/15 * * * *", 20 * 60, overlap="replace")]
    assert only(forecast_load(NOW, jobs, [LINUX])).demand == pytest.approx([1.0] * 96)


@pytest.mark.parametrize(
    "overlap, fields, expected",
    [("allow", {}, 3.0), ("queue", {"max_concurrent": 2}, 2.0), ("replace", {}, 1.0)],
)
def test_the_steady_rate_keeps_to_the_overlap_policy(overlap, fields, expected):
    jobs = [load("poller", "@every 1s", 3, overlap=overlap, **fields)]
    demand = only(forecast_load(NOW, jobs, [LINUX])).demand
    assert demand[10:] == pytest.approx([expected] * 86, abs=0.001)


def test_a_run_is_split_over_the_buckets_it_covers():
    jobs = [load("nightly", "7 2 * * *", 20 * 60)]
    result = forecast_load(NOW, jobs, [LINUX])
    linux = only(result)
    at_two = result.starts.index(dt.datetime(2026, 12, 5, 2, 0, tzinfo=dt.UTC))
    assert linux.demand[at_two : at_two + 2] == pytest.approx([8 / 15, 12 / 15])
    assert sum(linux.demand) == pytest.approx(20 / 15)
    assert result.spans == []


def test_spans_merge_consecutive_buckets_and_name_the_peak():
    jobs = [load(f"j{i}", "0 3 * * *", 30 * 60) for i in range(3)]
    jobs += [load("late", "10 3 * * *", 10 * 60)]
    result = forecast_load(NOW, jobs, [LINUX, RunnerSlots("linux-2", frozenset({"linux"}), 1)])
    (span,) = result.spans
    three = dt.datetime(2026, 12, 5, 3, 0, tzinfo=dt.UTC)
    assert (span.start, span.end) == (three, three + dt.timedelta(minutes=30))
    assert span.peak == pytest.approx(3 + 5 / 15)
    assert (span.slots_needed, span.capacity) == (4, 2)


def test_a_calendar_blocked_day_has_no_demand():
    workdays = CalendarRules(weekdays=["mon", "tue", "wed", "thu", "fri"])
    jobs = [load("hourly", "0 * * * *", 10 * 60, calendar=workdays)]
    result = forecast_load(NOW, jobs, [LINUX])
    linux = only(result)
    saturday = result.starts.index(dt.datetime(2026, 12, 5, 0, 0, tzinfo=dt.UTC))
    assert linux.demand[saturday:] == [0.0] * (96 - saturday)
    assert sum(linux.demand[:saturday]) == pytest.approx(12 * 10 / 15)


def test_an_every_second_job_is_a_steady_rate_past_the_cap():
    """How long it takes is a figure of bench/forecast_every_second.py."""
    fired = []
    jobs = [load("poller", "@every 1s", 2, counter=fired)]
    linux = only(forecast_load(NOW, jobs, [LINUX]))
    assert linux.demand == pytest.approx([2.0] * 96, abs=0.001)
    # 86,400 runs a day, but only the cap's worth enumerated.
    assert len(fired) <= core.EVERY_RUNS + 1


def test_a_cron_job_past_the_cap_keeps_the_pace_its_runs_showed():
    fired = []
    jobs = [load("minutely", "* * * * *", 30, counter=fired)]
    result = forecast_load(NOW, jobs, [LINUX], hours=48)
    assert len(fired) <= core.ENUMERATED_RUNS + 1 < 48 * 60
    assert only(result).demand == pytest.approx([0.5] * 192)


def test_without_jobs_the_forecast_still_spans_its_hours():
    result = forecast_load(NOW, [], [LINUX])
    assert (result.buckets, result.label_sets, result.spans) == (96, [], [])
    assert result.end == NOW + dt.timedelta(hours=24)


def test_the_steady_rate_keeps_to_the_calendar():
    office = CalendarRules(window_start=dt.time(9), window_end=dt.time(17))
    jobs = [load("poller", "@every 1s", 2, calendar=office)]
    result = forecast_load(NOW, jobs, [LINUX])
    linux = only(result)
    hour = {start.hour: load for start, load in zip(result.starts, linux.demand, strict=True)}
    assert hour[13] == pytest.approx(2.0, abs=0.001)
    assert hour[17] == 0.0 and hour[3] == 0.0
    assert hour[9] == pytest.approx(2.0, abs=0.001)


def test_a_singleton_every_second_job_running_two_seconds_keeps_one_going():
    jobs = [load("poller", "@every 1s", 2, overlap="skip")]
    assert only(forecast_load(NOW, jobs, [LINUX])).demand == pytest.approx([1.0] * 96, abs=0.001)


def test_runners_carrying_more_labels_count_toward_a_label_set():
    runners = [
        RunnerSlots("big", frozenset({"linux", "gpu"}), 3),
        RunnerSlots("small", frozenset({"linux"}), 2),
        RunnerSlots("win", frozenset({"windows"}), 5),
    ]
    jobs = [load("a", "@daily", 60), load("b", "@daily", 60, labels=("gpu", "linux")),
            load("c", "@daily", 60, labels=())]  # fmt: skip
    result = forecast_load(NOW, jobs, runners)
    capacity = {f.labels: f.capacity[0] for f in result.label_sets}
    assert capacity == {(): 10, ("linux",): 5, ("gpu", "linux"): 3}


def test_runners_not_taking_work_add_no_slots():
    runners = [LINUX, RunnerSlots("gone", frozenset({"linux"}), 4, takes_work=False)]
    assert only(forecast_load(NOW, [load("a", "@daily", 60)], runners)).capacity[0] == 1


def test_a_job_whose_schedule_cannot_be_read_is_left_out_and_named():
    def broken(after):
        raise ScheduleError("schedule 'nope' has 1 fields")
        yield

    jobs = [JobLoad("bad", ("linux",), 60, broken), load("good", "@hourly", 60)]
    result = forecast_load(NOW, jobs, [LINUX])
    assert result.skipped == {"bad": "schedule 'nope' has 1 fields"}
    assert only(result).jobs == 1


def test_jobs_sharing_a_key_enumerate_their_instants_once():
    fired = []
    jobs = [load(f"j{i}", "*/5 * * * *", 60, key="same", counter=fired) for i in range(10)]
    linux = only(forecast_load(NOW, jobs, [LINUX]))
    assert len(fired) <= 24 * 12 + 2
    assert linux.demand[5] == pytest.approx(10 * 3 * 60 / 900)


# Read from the database (both backends)


def ran(job, seconds, finished, state=Execution.SUCCEEDED):
    return ExecutionFactory(
        job=job, scheduled_for=finished - dt.timedelta(seconds=seconds), state=state,
        claimed_at=finished - dt.timedelta(seconds=seconds), finished_at=finished,
    )  # fmt: skip


def bucket_sum(result, labels=("linux",)):
    return sum(only(result, labels).demand)


@pytest.mark.django_db
def test_durations_are_the_median_of_the_newest_successful_runs():
    job = JobFactory(name="nightly", schedule="0 3 * * *", labels=["linux"], timeout=7200)
    for i in range(core.HISTORY_RUNS):
        ran(job, 600 + i, NOW - dt.timedelta(days=i + 1))
    ran(job, 5 * 3600, NOW - dt.timedelta(hours=5), state=Execution.FAILED)  # not a success
    for i in range(5):  # older than the newest HISTORY_RUNS: not read
        ran(job, 9000, NOW - dt.timedelta(days=40 + i))
    assert core.expected_seconds([job.pk]) == {job.pk: pytest.approx(609.5)}
    assert bucket_sum(forecast(NOW)) == pytest.approx(609.5 / 900)


@pytest.mark.django_db
def test_a_job_without_history_takes_its_timeout_else_a_minute():
    JobFactory(name="with-timeout", schedule="0 3 * * *", labels=["linux"], timeout=1800)
    JobFactory(name="plain", schedule="0 4 * * *", labels=["gpu"])
    result = forecast(NOW)
    assert bucket_sum(result) == pytest.approx(2.0)
    assert bucket_sum(result, ("gpu",)) == pytest.approx(core.DEFAULT_SECONDS / 900)


@pytest.mark.django_db
def test_paused_disabled_and_quarantined_jobs_are_left_out():
    JobFactory(name="active", schedule="@hourly", labels=["linux"])
    JobFactory(name="paused", schedule="@hourly", labels=["linux"], paused_at=NOW)
    JobFactory(name="disabled", schedule="@hourly", labels=["linux"], enabled=False)
    JobFactory(name="broken", schedule="@hourly", labels=["linux"], error="boom", error_at=NOW)
    assert only(forecast(NOW)).jobs == 1


@pytest.mark.django_db
def test_calendars_stored_in_the_database_gate_the_fires():
    workdays = Calendar.objects.create(
        name="workdays", weekdays=["mon", "tue", "wed", "thu", "fri"]
    )  # fmt: skip
    for i in range(10):
        JobFactory(name=f"hourly-{i}", schedule=f"{i} * * * *", labels=["linux"], calendar=workdays)
    result = forecast(NOW)
    linux = only(result)
    saturday = result.starts.index(dt.datetime(2026, 12, 5, 0, 0, tzinfo=dt.UTC))
    assert linux.jobs == 10
    assert sum(linux.demand[saturday:]) == 0.0
    assert sum(linux.demand[:saturday]) == pytest.approx(10 * 12 * 60 / 900)


@pytest.mark.django_db
def test_the_queries_do_not_grow_with_the_jobs():
    workdays = Calendar.objects.create(name="workdays", weekdays=["mon", "tue"])
    for i in range(3):
        JobFactory(name=f"a-{i}", schedule="@hourly", labels=["linux"], calendar=workdays)
    with CaptureQueriesContext(connection) as few:
        forecast(NOW)
    for i in range(30):
        job = JobFactory(name=f"b-{i}", schedule="@hourly", labels=["linux"], calendar=workdays)
        ran(job, 60, NOW - dt.timedelta(hours=1))
    with CaptureQueriesContext(connection) as many:
        forecast(NOW)
    assert len(many.captured_queries) == len(few.captured_queries)


@pytest.mark.django_db
def test_the_overlap_policy_is_read_with_the_job():
    JobFactory(name="queued", schedule="0,1,2 3 * * *", labels=["linux"], timeout=1800,
               overlap="queue", max_concurrent=1, max_queue=1)  # fmt: skip
    JobFactory(name="skipping", schedule="*/15 * * * *", labels=["gpu"], timeout=1200,
               singleton=True)  # fmt: skip
    result = forecast(NOW)
    assert sum(only(result).demand) == pytest.approx(2 * 2)  # one ran, one waited, one skipped
    assert max(only(result, ("gpu",)).demand) == pytest.approx(1.0)


@pytest.mark.django_db
def test_an_every_job_follows_its_own_grid():
    JobFactory(name="poll", schedule="@every 10m", labels=["linux"],
               next_run_at=NOW + dt.timedelta(minutes=7), timeout=60)  # fmt: skip
    result = forecast(NOW)
    # Runs at :07, :17, :27, ...: the :07 bucket's first run, the next bucket's one.
    assert only(result).demand[0] == pytest.approx(60 / 900)
    assert only(result).demand[1] == pytest.approx(2 * 60 / 900)


@pytest.mark.django_db
def test_only_online_runners_that_are_not_drained_add_slots():
    JobFactory(name="hourly", schedule="@hourly", labels=["linux"])
    RunnerFactory(name="online", labels=["linux", "docker"], capacity=4)
    RunnerFactory(name="offline", labels=["linux"], capacity=8, state=Runner.OFFLINE)
    RunnerFactory(name="drained", labels=["linux"], capacity=16, drained=True)
    RunnerFactory(name="draining", labels=["linux"], capacity=32, state=Runner.DRAINING)
    RunnerFactory(name="other", labels=["windows"], capacity=64)
    assert only(forecast(NOW)).capacity == [4] * 96


@pytest.mark.django_db
def test_a_shortage_is_named_with_its_hours():
    for name in ("a", "b"):
        JobFactory(name=name, schedule="*/15 * * * *", labels=["linux"], timeout=20 * 60)
    RunnerFactory(name="one", labels=["linux"], capacity=1)
    (span,) = forecast(NOW).spans
    assert (span.labels, span.capacity, span.slots_needed) == (("linux",), 1, 3)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "schedule, tz, policy",
    [
        ("30 9 * * *", "Europe/Berlin", "skip"),
        ("30 6 * * *", "UTC", "defer"),
        ("*/20 * * * *", "UTC", "skip"),
        ("0 * * * *", "America/New_York", "defer"),
        ("@every 25m", "UTC", "skip"),
        ("@every 25m", "UTC", "defer"),
    ],
)
def test_the_instants_are_the_jobs_own_fire_times(schedule, tz, policy):
    """What the forecast enumerates is what `Job.upcoming` (the loop's
    answer to "when next") says, calendar and policy applied."""
    office = Calendar.objects.create(
        name="office", timezone="Europe/Berlin", weekdays=["mon", "tue", "wed", "thu", "fri"],
        window_start=dt.time(8), window_end=dt.time(18),
    )  # fmt: skip
    job = JobFactory(
        name="checked", schedule=schedule, timezone=tz, calendar=office,
        calendar_policy=policy, next_run_at=NOW + dt.timedelta(minutes=11),
    )  # fmt: skip
    until = NOW + dt.timedelta(days=6)
    (found,) = core.job_loads(until)
    instants = list(found.fires(NOW))
    expected = [t for t in job.upcoming(NOW, 500) if t < until]
    assert instants == expected and len(instants) > 3


@pytest.mark.django_db
def test_jobs_with_h_forms_are_forecast_at_their_own_hashed_minutes():
    from scheduler.forecast import job_loads
    from scheduler.jobs.cron import parse_schedule

    for n in range(2):
        JobFactory(name=f"spread-{n}", schedule="H * * * *", next_run_at=None)
    loads = {load.name: load for load in job_loads(NOW + dt.timedelta(hours=2))}
    for name, load in loads.items():
        minute = min(parse_schedule("H * * * *", key=name).minutes)
        assert [t.minute for t in load.fires(NOW)] == [minute, minute]
    assert len({load.key for load in loads.values()}) == 2
