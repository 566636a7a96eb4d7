"""Contention the quarter hour's average hides: runs placed one by one on
their label set's slots (scheduler.forecast.contention), the peak at once
and each run's start delay, checked against a replay of a day of recorded
runs."""

import datetime as dt

import pytest

from scheduler.forecast import DueRun, JobLoad, RunnerSlots, forecast_load, recorded_runs, replay
from scheduler.forecast.contention import bucket_peaks, peak_at_once, queue_delays
from scheduler.forecast.fires import schedule_fires
from tests.factories import ExecutionFactory, JobFactory

DAY = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
LINUX = ("linux",)
DOCKER = ("docker",)


def at(hours: int, minutes: int = 0, seconds: float = 0) -> dt.datetime:
    return DAY + dt.timedelta(hours=hours, minutes=minutes, seconds=seconds)


def test_two_44_second_runs_due_at_once_on_one_slot_the_second_waits_44_seconds():
    runs = [DueRun(LINUX, at(2), 44.0), DueRun(LINUX, at(2), 44.0)]
    result = replay(runs, {LINUX: 1})
    assert result.delays == [0.0, 44.0]
    assert result.peaks == {LINUX: 2}


def test_two_slots_take_both_and_a_third_waits_for_the_first_to_end():
    runs = [DueRun(LINUX, at(2), 44.0), DueRun(LINUX, at(2), 10.0), DueRun(LINUX, at(2, 0, 5), 1.0)]
    assert replay(runs, {LINUX: 2}).delays == [0.0, 0.0, 5.0]
    assert replay(runs, {LINUX: 3}).delays == [0.0, 0.0, 0.0]


def test_runs_queue_in_the_order_they_are_due_not_the_order_given():
    runs = [DueRun(LINUX, at(2, 0, 30), 10.0), DueRun(LINUX, at(2), 60.0)]
    assert replay(runs, {LINUX: 1}).delays == [30.0, 0.0]


def test_each_label_set_queues_on_its_own_slots():
    runs = [DueRun(LINUX, at(2), 44.0), DueRun(DOCKER, at(2), 44.0), DueRun(LINUX, at(2), 1.0)]
    result = replay(runs, {LINUX: 1, DOCKER: 1})
    assert result.delays == [0.0, 0.0, 44.0]
    assert result.peaks == {LINUX: 2, DOCKER: 1}


def test_a_label_set_without_slots_never_starts():
    result = replay([DueRun(("gpu",), at(2), 5.0)], {LINUX: 4})
    assert result.delays == [None] and result.peaks == {("gpu",): 1}


def test_a_run_ending_as_another_is_due_frees_its_slot():
    runs = [DueRun(LINUX, at(2), 60.0), DueRun(LINUX, at(2, 1), 60.0)]
    result = replay(runs, {LINUX: 1})
    assert result.delays == [0.0, 0.0] and result.peaks == {LINUX: 1}


def test_a_negative_duration_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="seconds"):
        replay([DueRun(LINUX, at(2), -1.0)], {LINUX: 1})


def test_nothing_to_replay():
    assert replay([], {}).delays == [] and replay([], {}).peaks == {}
    assert queue_delays([], 1) == [] and peak_at_once([]) == 0


def test_bucket_peaks_count_runs_carried_over_from_the_bucket_before():
    # A run over two buckets, one ending on a bucket's boundary, one inside a bucket.
    runs = [(850.0, 100.0), (0.0, 900.0), (1000.0, 10.0), (1005.0, 1.0)]
    assert bucket_peaks(runs, 3, 900.0) == [2, 2, 0]
    # Before the window: counted where it still goes on.
    assert bucket_peaks([(-50.0, 100.0)], 2, 900.0) == [1, 0]
    assert bucket_peaks([(0.0, 0.0), (0.0, 0.0)], 1, 900.0) == [2]


def test_the_forecast_sees_the_44_seconds_its_average_hides():
    now = at(0)
    until = now + dt.timedelta(hours=25)
    jobs = [
        JobLoad(name, LINUX, 44.0, schedule_fires("0 2 * * *", "UTC", None, "skip", until))
        for name in ("backup-a", "backup-b")
    ]
    result = forecast_load(now, jobs, [RunnerSlots("one", frozenset(LINUX), 1)])
    (linux,) = result.label_sets
    two = 8  # 02:00
    assert linux.peak < 0.1 and result.spans == []
    assert (linux.peak_runs[two], linux.delay[two], linux.delay[two - 1]) == (2, 44.0, 0.0)
    assert (linux.most_at_once, linux.longest_delay) == (2, 44.0)
    (wait,) = result.waits
    assert (result.start_of(wait.bucket), wait.peak, wait.capacity, wait.delay) == (
        at(2), 2, 1, 44.0,
    )  # fmt: skip


# A recorded day: (job, labels, schedule, [(due, claimed after, held) seconds]).
# One linux slot, two docker slots; the claims a few tenths of a second
# after a slot frees, as the runners' long poll takes them.
RECORDED = [
    ("backup-a", LINUX, "0 2 * * *", [(at(2), 0.3, 44.0)]),
    ("backup-b", LINUX, "0 2 * * *", [(at(2), 44.6, 44.1)]),
    ("build-1", DOCKER, "0 3 * * *", [(at(3), 0.2, 100.0)]),
    ("build-2", DOCKER, "0 3 * * *", [(at(3), 0.4, 120.0)]),
    ("build-3", DOCKER, "0 3 * * *", [(at(3), 100.5, 90.0)]),
    ("sweep", LINUX, "0 5 * * *", [(at(5), 0.2, 30.0)]),
]
SLOTS = {LINUX: 1, DOCKER: 2}
TOLERANCE = 1.0  # seconds: the claim's own latency


@pytest.mark.django_db
def test_the_forecast_delays_match_a_replay_of_a_recorded_day():
    for name, labels, schedule, runs in RECORDED:
        job = JobFactory(name=name, schedule=schedule, labels=list(labels))
        for due, waited, held in runs:
            claimed = due + dt.timedelta(seconds=waited)
            ExecutionFactory(
                job=job,
                scheduled_for=due,
                claimed_at=claimed,
                finished_at=claimed + dt.timedelta(seconds=held),
                state="succeeded",
            )
    recorded = recorded_runs(DAY, DAY + dt.timedelta(days=1))
    assert len(recorded) == 6
    result = replay([run for run, _ in recorded], SLOTS)
    for (run, actual), predicted in zip(recorded, result.delays, strict=True):
        assert predicted is not None
        assert abs(predicted - actual) <= TOLERANCE, (run, actual, predicted)
    assert result.peaks == {LINUX: 2, DOCKER: 3}

    # The forecast of the same jobs, each as long as its recorded run,
    # predicts the same longest delay per quarter hour as the day had.
    until = DAY + dt.timedelta(hours=25)
    held = {name: runs[0][2] for name, _, _, runs in RECORDED}
    jobs = [
        JobLoad(name, labels, held[name], schedule_fires(schedule, "UTC", None, "skip", until))
        for name, labels, schedule, _ in RECORDED
    ]
    runners = [
        RunnerSlots("one", frozenset(LINUX), 1),
        RunnerSlots("builder", frozenset(DOCKER), 2),
    ]
    forecast = forecast_load(DAY, jobs, runners)
    for labels in SLOTS:
        (label_set,) = [s for s in forecast.label_sets if s.labels == labels]
        for bucket, predicted in enumerate(label_set.delay):
            start = forecast.start_of(bucket)
            actual = max(
                (waited for run, waited in recorded
                 if run.labels == labels and start <= run.at < start + forecast.bucket),
                default=0.0,
            )  # fmt: skip
            assert predicted is not None
            assert abs(predicted - actual) <= TOLERANCE, (labels, start, actual, predicted)
