"""The loop steps that find job.slow, job.missed and labels.unserved."""

import datetime as dt

import pytest

from notifications import detection, detectors
from notifications.models import Channel, Event, Rule
from runners.models import Runner
from scheduler.firing.loop import SchedulerLoop
from scheduler.models import Execution, Job
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_baselines():
    # Rolled-back tests reuse job ids on SQLite: no p95 outlives its test.
    detectors.forget()
    yield
    detectors.forget()


def seconds(n):
    return dt.timedelta(seconds=n)


def running(job, claimed_at, runner=None, **fields):
    return ExecutionFactory(
        job=job,
        scheduled_for=claimed_at,
        state=Execution.RUNNING,
        claimed_at=claimed_at,
        runner=runner,
        **fields,
    )


def history(job, durations, start=T0 - dt.timedelta(days=1)):
    """Successful runs of `job`, one an hour, lasting `durations` seconds."""
    for i, duration in enumerate(durations):
        at = start + dt.timedelta(hours=i)
        ExecutionFactory(
            job=job,
            scheduled_for=at,
            state=Execution.SUCCEEDED,
            claimed_at=at,
            finished_at=at + seconds(duration),
        )


def events(name):
    return list(Event.objects.filter(name=name).order_by("id"))


def rule(name, event, **fields):
    made = Rule.objects.create(name=name, events=[event], **fields)
    made.channels.add(Channel.objects.get_or_create(name="ops", kind=Channel.WEBHOOK)[0])
    return made


# job.slow


def test_a_run_past_max_duration_is_slow_once():
    job = JobFactory(name="billing-sync", max_duration=900)
    runner = RunnerFactory(name="build-3")
    execution = running(job, T0, runner=runner)

    assert detectors.detect_slow(T0 + seconds(900)) == 0
    assert detectors.detect_slow(T0 + seconds(901)) == 1
    assert detectors.detect_slow(T0 + seconds(960)) == 0

    [event] = events("job.slow")
    assert event.key == f"job.slow:{execution.pk}:max"
    assert event.execution == execution and event.job == job
    assert event.at == T0 + seconds(901)
    assert event.data["elapsed"] == 901
    assert event.data["max_duration"] == 900
    assert event.data["p95"] is None and event.data["factor"] is None
    assert event.data["job"]["name"] == "billing-sync"
    assert event.data["runner"] == {"name": "build-3"}


def test_a_run_past_its_baseline_times_the_factor_is_slow(settings):
    settings.CRONIQ_SLOW_FACTOR = 3.0
    settings.CRONIQ_SLOW_MIN_HISTORY = 5
    job = JobFactory()
    history(job, [10, 10, 10, 10, 20])  # p95 of 5 runs: the 5th, 20 s
    execution = running(job, T0)

    assert detectors.detect_slow(T0 + seconds(60)) == 0
    assert detectors.detect_slow(T0 + seconds(61)) == 1
    assert detectors.detect_slow(T0 + seconds(62)) == 0

    [event] = events("job.slow")
    assert event.key == f"job.slow:{execution.pk}:3"
    assert event.data == event.data | {"p95": 20.0, "factor": 3.0, "max_duration": None}
    assert event.data["elapsed"] == 61


def test_the_baseline_is_the_last_twenty_successes(settings):
    settings.CRONIQ_SLOW_MIN_HISTORY = 5
    job = JobFactory()
    history(job, [500] * 10, start=T0 - dt.timedelta(days=3))  # older than the last 20
    history(job, [10] * 20)
    ExecutionFactory(  # failures do not count
        job=job,
        scheduled_for=T0 - seconds(60),
        state=Execution.FAILED,
        claimed_at=T0 - seconds(60),
        finished_at=T0 - seconds(1),
    )
    running(job, T0)

    assert detectors.baseline(job.pk, T0) == 10.0
    assert detectors.detect_slow(T0 + seconds(31)) == 1


def test_a_short_job_is_not_slow_before_the_floor(settings):
    settings.CRONIQ_SLOW_MIN_HISTORY = 5
    job = JobFactory()
    history(job, [1] * 5)
    running(job, T0)

    assert detectors.detect_slow(T0 + seconds(30)) == 0
    assert detectors.detect_slow(T0 + seconds(31)) == 1


def test_no_baseline_without_the_minimum_history(settings):
    settings.CRONIQ_SLOW_MIN_HISTORY = 5
    job = JobFactory()
    history(job, [1, 1, 1, 1])
    running(job, T0)

    assert detectors.detect_slow(T0 + dt.timedelta(days=1)) == 0
    assert events("job.slow") == []


def test_each_rule_factor_is_its_own_event(settings):
    settings.CRONIQ_SLOW_FACTOR = 3.0
    rule("slow-pages", "job.slow", slow_factor=2.0)
    rule("other-event", "job.failing", slow_factor=1.5)  # routes no job.slow
    rule("disabled", "job.slow", slow_factor=1.2, enabled=False)
    job = JobFactory()
    history(job, [20] * 5)
    execution = running(job, T0)

    assert detectors.detect_slow(T0 + seconds(40)) == 0
    assert detectors.detect_slow(T0 + seconds(41)) == 1
    assert detectors.detect_slow(T0 + seconds(61)) == 1
    assert detectors.detect_slow(T0 + seconds(62)) == 0
    assert [e.key for e in events("job.slow")] == [
        f"job.slow:{execution.pk}:2",
        f"job.slow:{execution.pk}:3",
    ]


def test_the_baseline_is_read_once_a_minute(settings, django_assert_num_queries):
    settings.CRONIQ_SLOW_MIN_HISTORY = 5
    job = JobFactory()
    history(job, [100] * 5)
    for minute in range(3):
        running(job, T0 + dt.timedelta(minutes=minute))

    detectors.detect_slow(T0 + seconds(1))
    # Rules, running executions, no new keys: no p95 query while cached.
    with django_assert_num_queries(2):
        assert detectors.detect_slow(T0 + seconds(2)) == 0
    with django_assert_num_queries(3):
        detectors.detect_slow(T0 + seconds(62))


# job.missed


def test_a_pending_instant_past_its_grace_is_missed_naming_the_labels(settings):
    settings.CRONIQ_MISSED_GRACE = 300.0
    job = JobFactory(name="nightly", labels=["linux", "gpu"])
    RunnerFactory(labels=["linux"])
    execution = ExecutionFactory(job=job, scheduled_for=T0)

    assert detectors.detect_missed(T0 + seconds(300)) == 0
    assert detectors.detect_missed(T0 + seconds(301)) == 1
    assert detectors.detect_missed(T0 + seconds(400)) == 0

    [event] = events("job.missed")
    assert event.key == f"job.missed:{execution.pk}:300"
    assert event.execution == execution
    assert event.data["scheduled_for"] == T0.isoformat()
    assert event.data["grace"] == 300.0
    assert event.data["reason"] == "no online runner carries the labels gpu, linux"
    assert event.data["started_at"] is None


def test_missed_because_the_runners_are_busy(settings):
    settings.CRONIQ_MISSED_GRACE = 60.0
    job = JobFactory(labels=["linux"])
    runner = RunnerFactory(labels=["linux", "db"], capacity=1)
    running(JobFactory(), T0, runner=runner)
    ExecutionFactory(job=job, scheduled_for=T0)

    assert detectors.detect_missed(T0 + seconds(61)) == 1
    [event] = events("job.missed")
    assert event.data["reason"].startswith("the runners carrying its labels are busy (1 running")
    assert "1 executions queued" in event.data["reason"]


def test_retries_and_manual_runs_are_not_missed_instants(settings):
    settings.CRONIQ_MISSED_GRACE = 60.0
    job = JobFactory()
    ExecutionFactory(job=job, trigger=Execution.MANUAL)
    ExecutionFactory(job=job, scheduled_for=T0 - seconds(600), attempt=2, trigger=Execution.RETRY)
    ExecutionFactory(job=job, scheduled_for=T0 - seconds(1200), cancel_requested_at=T0)

    assert detectors.detect_missed(T0 + seconds(3600)) == 0


def test_an_execution_created_late_is_missed_because_the_scheduler_was_down(settings):
    settings.CRONIQ_MISSED_GRACE = 300.0
    job = JobFactory()
    RunnerFactory()
    # The loop came back at T0 + 1h and caught the 12:00 instant up; a runner
    # took it at once and it finished before the detector looked.
    back = T0 + dt.timedelta(hours=1)
    execution = ExecutionFactory(
        job=job,
        scheduled_for=T0,
        trigger=Execution.CATCH_UP,
        created_at=back,
        state=Execution.SUCCEEDED,
        claimed_at=back,
        finished_at=back + seconds(2),
    )
    on_time = ExecutionFactory(
        job=job,
        scheduled_for=back,
        state=Execution.SUCCEEDED,
        claimed_at=back,
        finished_at=back + seconds(2),
    )

    assert detectors.detect_missed(back + seconds(5)) == 1
    assert detectors.detect_missed(back + seconds(10)) == 0

    [event] = events("job.missed")
    assert event.execution == execution != on_time
    assert event.data["reason"] == "the scheduler was not running at the instant"
    assert event.data["started_at"] == back.isoformat()


def test_a_late_execution_still_pending_names_the_stalled_scheduler(settings):
    settings.CRONIQ_MISSED_GRACE = 300.0
    back = T0 + dt.timedelta(hours=1)
    ExecutionFactory(job=JobFactory(labels=["gpu"]), created_at=back, trigger=Execution.CATCH_UP)

    assert detectors.detect_missed(back + seconds(1)) == 1
    [event] = events("job.missed")
    assert event.data["reason"] == "the scheduler was not running at the instant"


def test_a_staggered_run_started_at_its_turn_is_not_missed(settings):
    settings.CRONIQ_MISSED_GRACE = 60.0
    turn = T0 + seconds(600)  # the third runner of a run_on: all job, stagger 300s
    execution = running(JobFactory(), turn + seconds(1), runner=RunnerFactory())
    execution.scheduled_for = execution.created_at = T0
    execution.run_after = turn
    execution.save()

    assert detectors.detect_missed(turn + seconds(5)) == 0
    Execution.objects.filter(pk=execution.pk).update(claimed_at=turn + seconds(61))
    assert detectors.detect_missed(turn + seconds(65)) == 1


def test_a_run_that_queued_past_its_grace_is_missed_once_started(settings):
    settings.CRONIQ_MISSED_GRACE = 60.0
    runner = RunnerFactory()
    execution = running(JobFactory(), T0 + seconds(90), runner=runner)
    execution.scheduled_for = execution.run_after = execution.created_at = T0
    execution.save()

    assert detectors.detect_missed(T0 + seconds(95)) == 1
    [event] = events("job.missed")
    assert event.data["reason"] == "it waited 90s in the queue before a runner took it"


def test_after_a_complete_scan_only_what_joined_since_is_read(settings, monkeypatch):
    settings.CRONIQ_MISSED_GRACE = 300.0
    monkeypatch.setattr(detectors, "ID_SLACK", 0)
    job = JobFactory()
    ExecutionFactory(job=job, scheduled_for=T0 - seconds(900))  # reported by the first scan
    assert detectors.detect_missed(T0) == 1
    # Not read again: its event gone (retention), it is not reported again...
    Event.objects.filter(name="job.missed").delete()
    assert detectors.detect_missed(T0 + seconds(5)) == 0
    # ...until a process starts afresh and scans everything once.
    detectors.forget()
    assert detectors.detect_missed(T0 + seconds(6)) == 1

    # Created now for an instant an hour ago: behind the run_after window.
    catch_up = ExecutionFactory(
        job=job,
        scheduled_for=T0 - dt.timedelta(hours=1),
        created_at=T0 + seconds(9),
        trigger=Execution.CATCH_UP,
    )
    assert detectors.detect_missed(T0 + seconds(10)) == 1
    assert events("job.missed")[-1].execution == catch_up


def test_a_backlog_is_reported_a_few_at_a_time_and_wholly(settings, monkeypatch):
    settings.CRONIQ_MISSED_GRACE = 60.0
    monkeypatch.setattr(detection, "EMIT_LIMIT", 3)
    monkeypatch.setattr(detectors, "BATCH", 4)
    monkeypatch.setattr(detectors, "ID_SLACK", 0)
    job = JobFactory()
    for minute in range(10):
        ExecutionFactory(job=job, scheduled_for=T0 + dt.timedelta(minutes=minute))

    now = T0 + dt.timedelta(minutes=20)
    emitted = [detectors.detect_missed(now + seconds(i)) for i in range(5)]

    assert emitted == [3, 3, 3, 1, 0]
    assert Event.objects.filter(name="job.missed").count() == 10
    assert detectors.detect_missed(now + seconds(61)) == 0


def test_each_rule_grace_is_its_own_missed_event(settings):
    settings.CRONIQ_MISSED_GRACE = 300.0
    rule("quick", "job.missed", grace=60)
    execution = ExecutionFactory(job=JobFactory(labels=["gpu"]))

    assert detectors.detect_missed(T0 + seconds(61)) == 1
    assert detectors.detect_missed(T0 + seconds(301)) == 1
    assert detectors.detect_missed(T0 + seconds(302)) == 0
    assert [e.key for e in events("job.missed")] == [
        f"job.missed:{execution.pk}:60",
        f"job.missed:{execution.pk}:300",
    ]


# labels.unserved


def test_pending_work_no_runner_carries_is_unserved_once_per_episode(settings):
    settings.CRONIQ_UNSERVED_GRACE = 300.0
    linux = RunnerFactory(name="linux-1", labels=["linux"])
    gpu_job = JobFactory(name="train", labels=["gpu", "linux"])
    ExecutionFactory(job=gpu_job, scheduled_for=T0)
    ExecutionFactory(job=gpu_job, scheduled_for=T0 + seconds(60))
    ExecutionFactory(job=JobFactory(labels=["linux"]), scheduled_for=T0)  # served

    assert detectors.detect_unserved(T0 + seconds(300)) == 0
    assert detectors.detect_unserved(T0 + seconds(361)) == 1
    assert detectors.detect_unserved(T0 + seconds(600)) == 0

    [event] = events("labels.unserved")
    assert event.key == f"labels.unserved:gpu,linux:{T0.isoformat()}:300"
    assert event.data == {
        "labels": ["gpu", "linux"],
        "pending": 2,
        "since": T0.isoformat(),
        "grace": 300.0,
        "jobs": ["train"],
        "online": [{"name": "linux-1", "labels": ["linux"]}],
    }

    # A gpu runner serves the episode; later the gpu runners are gone again.
    Execution.objects.filter(job=gpu_job).update(
        state=Execution.SUCCEEDED, claimed_at=T0 + seconds(700), finished_at=T0 + seconds(710)
    )
    assert detectors.detect_unserved(T0 + seconds(720)) == 0
    later = T0 + dt.timedelta(hours=2)
    ExecutionFactory(job=gpu_job, scheduled_for=later)
    assert detectors.detect_unserved(later + seconds(301)) == 1
    assert events("labels.unserved")[-1].data["since"] == later.isoformat()
    assert linux.state == Runner.ONLINE


def test_a_draining_runner_serves_no_labels(settings):
    settings.CRONIQ_UNSERVED_GRACE = 60.0
    RunnerFactory(name="gpu-1", labels=["gpu"], state=Runner.DRAINING)
    RunnerFactory(name="gpu-2", labels=["gpu"], drained=True)
    RunnerFactory(name="gpu-3", labels=["gpu"], state=Runner.OFFLINE)
    ExecutionFactory(job=JobFactory(labels=["gpu"]))

    assert detectors.detect_unserved(T0 + seconds(61)) == 1
    [event] = events("labels.unserved")
    assert event.data["online"] == []

    RunnerFactory(name="gpu-4", labels=["gpu", "linux"])
    ExecutionFactory(job=JobFactory(labels=["gpu"]), scheduled_for=T0 + seconds(1))
    assert detectors.detect_unserved(T0 + seconds(200)) == 0


def test_with_no_runner_online_even_unlabelled_work_is_unserved(settings):
    settings.CRONIQ_UNSERVED_GRACE = 60.0
    ExecutionFactory(job=JobFactory())

    assert detectors.detect_unserved(T0 + seconds(61)) == 1
    assert events("labels.unserved")[0].data["labels"] == []
    assert detectors.detect_missed(T0 + seconds(400)) == 1
    assert events("job.missed")[0].data["reason"] == "no runner is online"


def test_thousands_of_jobs_sharing_a_label_set_make_one_query_term(settings):
    """The label sets are distinct sets, not one per job: 1,500 jobs on
    one set once built a query too deep for SQLite."""
    settings.CRONIQ_UNSERVED_GRACE = 60.0
    Job.objects.bulk_create(
        Job(name=f"many-{n}", schedule="@daily", command="true", labels=["gpu", "linux"])
        for n in range(1500)
    )
    ExecutionFactory(job=Job.objects.get(name="many-7"))
    Job.objects.filter(name="many-8").update(labels=["linux", "gpu"])  # another spelling

    assert detectors.detect_unserved(T0 + seconds(61)) == 1
    assert len(detectors.label_sets(T0 + seconds(61))) == 1


def test_a_long_label_set_still_makes_a_key(settings):
    settings.CRONIQ_UNSERVED_GRACE = 60.0
    labels = [f"label-{i:03d}-with-a-long-name" for i in range(20)]
    ExecutionFactory(job=JobFactory(labels=labels))

    assert detectors.detect_unserved(T0 + seconds(61)) == 1
    assert detectors.detect_unserved(T0 + seconds(62)) == 0
    [event] = events("labels.unserved")
    assert len(event.key) <= 200 and event.data["labels"] == sorted(labels)


# thresholds and rules


def test_an_event_is_meant_for_the_rules_of_its_threshold(settings):
    settings.CRONIQ_MISSED_GRACE = 300.0
    settings.CRONIQ_SLOW_FACTOR = 3.0
    default = Rule(name="default", events=["job.missed", "job.slow"])
    quick = Rule(name="quick", events=["job.missed"], grace=60, slow_factor=2.0)

    assert detection.threshold_matches(default, "job.missed", {"grace": 300.0})
    assert not detection.threshold_matches(default, "job.missed", {"grace": 60.0})
    assert detection.threshold_matches(quick, "job.missed", {"grace": 60.0})
    assert detection.threshold_matches(quick, "job.slow", {"factor": 2.0})
    assert not detection.threshold_matches(quick, "job.slow", {"factor": 3.0})
    assert detection.threshold_matches(quick, "job.slow", {"factor": None})
    assert detection.threshold_matches(quick, "job.failing", {"streak": 3})


DETECTORS = (detectors.detect_slow, detectors.detect_missed, detectors.detect_unserved)


def test_the_detectors_are_loop_steps():
    from django.apps import apps

    steps = apps.get_app_config("notifications").loop_steps(SchedulerLoop())
    found = [(s.name, s.run, s.every) for s in steps if s.run in DETECTORS]
    assert found == [
        ("slow", detectors.detect_slow, 5.0),
        ("missed", detectors.detect_missed, 5.0),
        ("unserved", detectors.detect_unserved, 5.0),
    ]


@pytest.mark.django_db
def test_the_grace_checks_look_a_tenth_of_the_shortest_grace_apart(settings):
    settings.CRONIQ_MISSED_GRACE = 300
    settings.CRONIQ_UNSERVED_GRACE = 120
    # The default graces: every 30 s at most, 12 s for 120 s.
    assert detectors.next_missed_check(T0) == T0 + dt.timedelta(seconds=30)
    assert detectors.next_unserved_check(T0) == T0 + dt.timedelta(seconds=12)
    # A rule with a short grace brings its check closer, down to 5 s.
    rule("tight", "job.missed", grace=60)
    assert detectors.next_missed_check(T0) == T0 + dt.timedelta(seconds=6)
    rule("tighter", "job.missed", grace=10)
    assert detectors.next_missed_check(T0) == T0 + dt.timedelta(seconds=5)
    assert detectors.next_unserved_check(T0) == T0 + dt.timedelta(seconds=12)


def test_the_loop_runs_the_missed_check_again_only_at_its_next_look(db, settings):
    settings.CRONIQ_MISSED_GRACE = 300
    loop = SchedulerLoop()
    ran = []
    loop.steps = [
        step._replace(run=lambda now: ran.append(now) or 0)
        for step in loop.steps
        if step.name == "missed"
    ]
    for second in (0, 5, 10, 29, 30, 35):
        loop.tick(T0 + dt.timedelta(seconds=second))
    assert [(at - T0).total_seconds() for at in ran] == [0, 30]
