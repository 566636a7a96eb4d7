"""One iteration of the scheduler loop, at fixed instants."""

import datetime as dt
import inspect
import os
import re
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import audit
from runners.models import Runner
from scheduler.firing import loop as loop_module
from scheduler.firing import steps
from scheduler.firing.loop import SchedulerLoop
from scheduler.models import Execution, Job
from scheduler.runs import operations
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

# run_once() manages its connection, as the loop does: that needs real
# transactions, not the test-wrapping one.
pytestmark = pytest.mark.django_db(transaction=True)

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def test_one_tick_fires_due_jobs_and_reaps_expired_leases():
    due = JobFactory(schedule="*/5 * * * *", next_run_at=T0)
    JobFactory(schedule="*/5 * * * *", next_run_at=T0 + dt.timedelta(minutes=5))
    orphan = ExecutionFactory(
        job=JobFactory(next_run_at=None),
        state=Execution.RUNNING,
        runner=RunnerFactory(),
        lease=1,
        claimed_at=T0 - dt.timedelta(minutes=1),
        lease_expires_at=T0 - dt.timedelta(seconds=1),
    )

    done = SchedulerLoop(clock=lambda: T0).run_once()

    assert done == {"fired": 1, "reaped": 1}
    assert due.executions.get().state == Execution.PENDING
    orphan.refresh_from_db()
    assert orphan.state == Execution.LOST


def test_a_tick_with_nothing_to_do_reports_nothing():
    JobFactory(next_run_at=T0 + dt.timedelta(hours=1))
    assert SchedulerLoop(clock=lambda: T0).run_once() == {}


def test_an_idle_loop_writes_its_heartbeat_every_few_seconds_not_every_tick(settings):
    settings.CRONIQ_STALL_GRACE = 60
    JobFactory(next_run_at=T0 + dt.timedelta(hours=1))
    loop = SchedulerLoop()
    seconds = dt.timedelta(seconds=1)

    loop.tick(T0)
    assert audit.last_tick() == T0
    for n in range(1, 5):
        loop.tick(T0 + n * seconds)
    assert audit.last_tick() == T0  # nothing written: nothing woken
    loop.tick(T0 + 5 * seconds)
    assert audit.last_tick() == T0 + 5 * seconds


def test_a_tick_that_did_work_writes_its_heartbeat():
    loop = SchedulerLoop()
    loop.tick(T0)
    JobFactory(next_run_at=T0 + dt.timedelta(seconds=1))

    assert loop.tick(T0 + dt.timedelta(seconds=1)) == {"fired": 1}
    assert audit.last_tick() == T0 + dt.timedelta(seconds=1)


def test_the_heartbeat_keeps_well_inside_a_short_stall_grace(settings):
    settings.CRONIQ_STALL_GRACE = 3
    assert loop_module.heartbeat_every() == 0.5
    settings.CRONIQ_STALL_GRACE = 600
    assert loop_module.heartbeat_every() == loop_module.HEARTBEAT_AT_LEAST_EVERY


def test_the_loop_sleeps_no_longer_than_until_the_earliest_due_job(monkeypatch):
    JobFactory(next_run_at=T0 + dt.timedelta(milliseconds=300))
    lead = dt.timedelta(milliseconds=100)  # fires a lead before the instant
    loop = SchedulerLoop(interval=5.0, clock=lambda: T0, fire_lead=lead)
    # The sleep's deadline is on a clock that moves only while the loop
    # waits: the time a loaded machine takes to read the jobs does not
    # use up the 200 ms before the first wait.
    elapsed = [0.0]
    monkeypatch.setattr(loop_module, "time", SimpleNamespace(monotonic=lambda: elapsed[0]))
    waits = []

    def wait(seconds):
        waits.append(seconds)
        elapsed[0] += seconds
        return True

    monkeypatch.setattr(loop.stopping, "wait", wait)

    loop.sleep_until_due()

    assert waits and all(seconds > 0 for seconds in waits)
    assert sum(waits) == pytest.approx(0.2)  # until the job's lead, not the 5 s interval


def test_a_job_saved_by_another_connection_wakes_the_sleeping_loop():
    job = JobFactory(next_run_at=T0 + dt.timedelta(hours=1))
    loop = SchedulerLoop(interval=5.0, clock=lambda: T0)
    loop.sleep_until_due()  # after a first look at the jobs' edit marker (none: 5 s)
    saved = count_job_saved(loop)
    loop.interval = 60.0  # only the edit can end this sleep within the test

    def edit():
        time.sleep(0.3)
        edited = Job.objects.get(pk=job.pk)
        edited.command = "echo edited"
        edited.save()
        connections.close_all()

    editor = threading.Thread(target=edit)
    editor.start()
    started = time.monotonic()
    loop.sleep_until_due()
    editor.join()

    assert saved == [1]  # the edit woke it...
    assert time.monotonic() - started < loop.interval / 2  # ...not the interval


def count_job_saved(loop):
    """A list that gets an item each time `loop` learns a job was saved."""
    saved = []
    job_saved = loop.job_saved
    loop.job_saved = lambda: saved.append(1) or job_saved()
    return saved


def test_a_sleeping_loop_reads_the_edit_marker_only_when_a_job_may_have_been_saved():
    JobFactory(next_run_at=T0 + dt.timedelta(hours=1))
    loop = SchedulerLoop(interval=0.45, clock=lambda: T0)
    loop.sleep_until_due()

    with CaptureQueriesContext(connection) as queries:
        loop.sleep_until_due()  # four looks; nobody else commits (SQLite), no NOTIFY

    assert not [q for q in queries if "updated_at" in q["sql"]]


def test_on_postgresql_a_sleeping_loop_blocks_until_a_job_is_saved_or_it_is_stopped():
    if connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY: on SQLite the loop looks for commits every 100 ms")
    job = JobFactory(next_run_at=T0 + dt.timedelta(hours=1))
    loop = SchedulerLoop(interval=1.0, clock=lambda: T0)
    loop.waker = os.pipe()  # as run_forever sets it
    looks = []
    moved = loop.edits.moved
    loop.edits.moved = lambda: looks.append(1) or moved()

    def later(action):
        def run():
            time.sleep(0.3)
            action()
            connections.close_all()

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    def save():
        edited = Job.objects.get(pk=job.pk)
        edited.command = "echo edited"
        edited.save()

    try:
        # Its first look starts listening: what was saved before is unknown,
        # so it ends the sleep and the next tick reads the jobs anew.
        loop.sleep_until_due()
        assert not loop.watched
        looks.clear()
        started = time.monotonic()
        loop.sleep_until_due()  # nothing happens: the interval
        assert time.monotonic() - started >= 0.9
        assert loop.watched  # the interval ended it
        assert len(looks) <= 2  # not one look every 100 ms

        saved = count_job_saved(loop)
        loop.interval = 60.0  # only the save, then the stop, can end these sleeps
        for action in (save, loop.stop):
            thread = later(action)
            started = time.monotonic()
            loop.sleep_until_due()
            thread.join()
            assert time.monotonic() - started < loop.interval / 2, action
        assert saved == [1]  # the save woke the first
    finally:
        for end in loop.waker:
            os.close(end)


def test_stop_ends_run_forever_after_the_current_tick():
    loop = SchedulerLoop(interval=0.01, clock=lambda: T0)
    ticks = []
    original = loop.run_once

    def run_once():
        ticks.append(1)
        loop.stop()
        return original()

    loop.run_once = run_once
    loop.run_forever()
    assert ticks == [1]


def test_a_stop_that_comes_while_run_forever_closes_its_pipe_does_not_fail():
    """A signal's stop() from another thread, paused between seeing the wake
    pipe and writing to it while run_forever ends and closes that pipe."""
    loop = SchedulerLoop(interval=0.01, clock=lambda: T0)
    loop.run_once = loop.stopping.set  # one tick that asks to stop
    loop.sleep_until_due = lambda: None
    source, first = inspect.getsourcelines(SchedulerLoop.stop)
    write_line = first + next(i for i, text in enumerate(source) if "os.write(" in text)
    ended = threading.Event()
    paused = threading.Event()

    def pause_before_the_write(frame, event, arg):
        stop_code = SchedulerLoop.stop.__code__
        if event == "line" and frame.f_code is stop_code and frame.f_lineno == write_line:
            paused.set()
            ended.wait(1)  # run_forever may close the pipe meanwhile
        return pause_before_the_write

    errors = []

    def stop():
        sys.settrace(lambda frame, event, arg: pause_before_the_write)
        try:
            loop.stop()
        except Exception as error:  # noqa: BLE001 - the failure under test
            errors.append(error)
        finally:
            sys.settrace(None)

    original = loop.loop_forever
    stopper = threading.Thread(target=stop)

    def loop_forever():
        original()
        stopper.start()
        assert paused.wait(5)

    loop.loop_forever = loop_forever
    loop.run_forever()
    ended.set()
    stopper.join(5)
    assert errors == []
    assert loop.waker is None


def test_a_stop_signal_in_the_thread_closing_the_pipe_does_not_hang_it():
    """Under scheduler_loop, stop() is the signal handler of the thread that
    runs run_forever: it may come while that thread holds the pipe's lock."""
    loop = SchedulerLoop(interval=0.01, clock=lambda: T0)
    loop.waker = os.pipe()
    stopped = threading.Event()

    def interrupted_while_holding_the_lock():
        with loop.waker_lock:
            loop.stop()  # as a handler would run, between two lines here
            stopped.set()

    thread = threading.Thread(target=interrupted_while_holding_the_lock, daemon=True)
    thread.start()
    try:
        assert stopped.wait(5)
        assert os.read(loop.waker[0], 1) == b"!"
    finally:
        for end in loop.waker:
            os.close(end)


# The steps the apps contribute


def test_the_loop_runs_the_steps_the_apps_contribute_firing_first():
    loop = SchedulerLoop(clock=lambda: T0)

    assert [(step.name, step.every) for step in loop.steps] == [
        ("fired", 0.0),
        ("timed_out", 0.0),
        ("pauses_ended", 0.0),
        ("reaped", 0.0),
        ("audit_pruned", steps.HOUSEKEEPING_INTERVAL),
        ("pruned", steps.HOUSEKEEPING_INTERVAL),
        ("promoted", steps.HOUSEKEEPING_INTERVAL),
        ("requirements", steps.HOUSEKEEPING_INTERVAL),
        ("runners", steps.HOUSEKEEPING_INTERVAL),
        ("flapping", steps.HOUSEKEEPING_INTERVAL),
        ("notifier", steps.HOUSEKEEPING_INTERVAL),
        ("incidents_closed", 1.0),
        ("slow", steps.HOUSEKEEPING_INTERVAL),
        ("missed", steps.HOUSEKEEPING_INTERVAL),
        ("unserved", steps.HOUSEKEEPING_INTERVAL),
        ("digests", 30.0),
        ("notifications_pruned", steps.HOUSEKEEPING_INTERVAL),
        ("checks", 1.0),
        ("check_pings_pruned", steps.HOUSEKEEPING_INTERVAL),
    ]


def test_each_step_runs_on_its_own_cadence():
    runs = []
    loop = SchedulerLoop(clock=lambda: T0)
    loop.steps = [
        steps.Step("often", lambda now: runs.append(("often", now)) or 1),
        steps.Step("rarely", lambda now: runs.append(("rarely", now)) or 1, every=5.0),
    ]
    instants = [T0 + dt.timedelta(seconds=s) for s in (0, 1, 4.9, 5, 6)]

    reports = [loop.tick(now) for now in instants]

    assert reports == [
        {"often": 1, "rarely": 1},
        {"often": 1},
        {"often": 1},
        {"often": 1, "rarely": 1},
        {"often": 1},
    ]
    assert [now for name, now in runs if name == "rarely"] == [instants[0], instants[3]]


def test_housekeeping_steps_run_together_once_then_spread_over_their_interval():
    loop = SchedulerLoop(clock=lambda: T0)
    loop.steps = [
        steps.Step("often", lambda now: 1),
        steps.Step("left", lambda now: 1, every=4.0),
        steps.Step("right", lambda now: 1, every=4.0),
    ]
    instants = [T0 + dt.timedelta(seconds=s) for s in (0, 4, 6, 8, 10)]

    reports = [loop.tick(now) for now in instants]

    assert reports == [
        {"often": 1, "left": 1, "right": 1},
        {"often": 1, "left": 1},
        {"often": 1, "right": 1},
        {"often": 1, "left": 1},
        {"often": 1, "right": 1},
    ]


def test_a_step_that_knows_its_next_deadline_is_skipped_until_then_or_a_job_edit():
    runs = []
    loop = SchedulerLoop(clock=lambda: T0)
    loop.steps = [
        steps.Step(
            "paced",
            lambda now: runs.append(now) or 1,
            until=lambda now: now + dt.timedelta(seconds=3),
        )
    ]

    for seconds in (0, 1, 2, 3, 4):
        loop.tick(T0 + dt.timedelta(seconds=seconds))
    loop.not_before.clear()  # what a job edit seen while sleeping does
    loop.tick(T0 + dt.timedelta(seconds=5))

    assert runs == [T0 + dt.timedelta(seconds=s) for s in (0, 3, 5)]


def test_with_nothing_running_the_reaper_and_timeouts_wait_five_seconds_and_a_grace(settings):
    settings.CRONIQ_LEASE_TTL = 30
    settings.CRONIQ_TIMEOUT_GRACE = 20
    loop = SchedulerLoop(clock=lambda: T0)
    loop.tick(T0)

    assert loop.not_before["reaped"] == T0 + dt.timedelta(seconds=5)  # REAP_AT_LEAST_EVERY
    assert loop.not_before["timed_out"] == T0 + dt.timedelta(seconds=20)


def test_a_running_execution_brings_the_reaper_and_timeouts_forward(settings):
    settings.CRONIQ_TIMEOUT_GRACE = 20
    ExecutionFactory(
        job=JobFactory(next_run_at=None, timeout=5),
        state=Execution.RUNNING,
        runner=RunnerFactory(),
        lease=1,
        claimed_at=T0 - dt.timedelta(seconds=10),  # past its timeout, within the grace
        lease_expires_at=T0 + dt.timedelta(seconds=12),
    )
    loop = SchedulerLoop(clock=lambda: T0)
    loop.tick(T0)

    assert loop.not_before["reaped"] == T0 + dt.timedelta(seconds=5)
    loop.tick(T0 + dt.timedelta(seconds=5))
    assert loop.not_before["reaped"] == T0 + dt.timedelta(seconds=10)
    loop.tick(T0 + dt.timedelta(seconds=10))
    assert loop.not_before["reaped"] == T0 + dt.timedelta(seconds=12)  # the lease
    assert loop.not_before["timed_out"] == T0 + dt.timedelta(seconds=15)
    assert loop.tick(T0 + dt.timedelta(seconds=12, milliseconds=1)) == {"reaped": 1}


def test_the_runner_states_step_rests_until_a_runner_can_have_gone_silent(settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 10  # offline after 30 s of silence
    settings.CRONIQ_RUNNER_RETENTION = 3600
    quiet = RunnerFactory(name="quiet", last_seen_at=T0 - dt.timedelta(seconds=20))
    RunnerFactory(name="gone", state="offline", last_seen_at=T0 - dt.timedelta(seconds=3590))
    loop = SchedulerLoop(clock=lambda: T0)
    runners = [step for step in loop.steps if step.name == "runners"]

    def run(at):
        return loop.run_units(at, loop.units(at, runners))

    run(T0)
    assert loop.not_before["runners"] == T0 + dt.timedelta(seconds=10)  # "quiet" goes silent
    assert loop.units(T0 + dt.timedelta(seconds=9.9), runners) == []  # its `every` alone: due
    assert run(T0 + dt.timedelta(seconds=10, milliseconds=1)) == {"runners": 2}
    assert loop.not_before["runners"] == T0 + dt.timedelta(seconds=40, milliseconds=1)
    assert not Runner.objects.filter(name="gone").exists()  # forgotten at its retention
    assert Runner.objects.get(pk=quiet.pk).state == "offline"


def test_pauses_ended_waits_for_the_earliest_pause_end_and_resumes_at_it():
    job = JobFactory(next_run_at=T0 + dt.timedelta(hours=1))
    loop = SchedulerLoop(clock=lambda: T0)
    loop.tick(T0)
    at_least_every = dt.timedelta(seconds=operations.PAUSES_CHECKED_AT_LEAST_EVERY)
    assert loop.not_before["pauses_ended"] == T0 + at_least_every

    operations.pause(Job.objects.filter(pk=job.pk), T0, "op", until=T0 + dt.timedelta(seconds=2))
    loop.not_before.clear()  # what the pause, a job edit, does to a sleeping loop
    loop.tick(T0 + dt.timedelta(seconds=1))
    assert loop.not_before["pauses_ended"] == T0 + dt.timedelta(seconds=2)

    assert loop.tick(T0 + dt.timedelta(seconds=2)) == {"pauses_ended": 1}


def test_a_pause_with_an_end_wakes_the_sleeping_loop():
    job = JobFactory(next_run_at=T0 + dt.timedelta(hours=1))
    loop = SchedulerLoop(interval=5.0, clock=lambda: T0)
    loop.sleep_until_due()
    loop.not_before["pauses_ended"] = T0 + dt.timedelta(seconds=5)
    loop.interval = 60.0  # only the pause can end this sleep within the test

    def pause():
        time.sleep(0.3)
        until = timezone.now() + dt.timedelta(seconds=2)
        operations.pause(Job.objects.filter(pk=job.pk), timezone.now(), "op", until=until)
        connections.close_all()

    pausing = threading.Thread(target=pause)
    pausing.start()
    started = time.monotonic()
    loop.sleep_until_due()
    pausing.join()

    # The pause is a job edit: it woke the loop and cleared `not_before`.
    assert "pauses_ended" not in loop.not_before
    assert time.monotonic() - started < loop.interval / 2


def test_a_failing_step_is_logged_and_the_steps_after_it_still_run(caplog):
    def broken(now):
        raise ValueError("a bug in one step")

    loop = SchedulerLoop(clock=lambda: T0)
    loop.steps = [steps.Step("broken", broken), steps.Step("fine", lambda now: 2)]

    assert loop.tick(T0) == {"fine": 2}
    assert any("broken" in r.getMessage() for r in caplog.records)


def test_an_app_below_the_scheduler_contributes_a_plain_tuple(monkeypatch):
    class Below:
        def loop_steps(self, loop):
            return [("cleanup", len, 60.0)]

    class Above:
        def loop_steps(self, loop):
            return [steps.Step("hourly", len, 3600.0), steps.Step("urgent", len)]

    monkeypatch.setattr(steps.apps, "get_app_configs", lambda: [Below(), object(), Above()])

    collected = steps.collect(loop=None)

    assert collected == [
        steps.Step("urgent", len, 0.0),
        steps.Step("cleanup", len, 60.0),
        steps.Step("hourly", len, 3600.0),
    ]


def test_two_steps_with_one_name_are_refused(monkeypatch):
    class Twice:
        def loop_steps(self, loop):
            return [steps.Step("fired", len), steps.Step("fired", len)]

    monkeypatch.setattr(steps.apps, "get_app_configs", lambda: [Twice()])

    with pytest.raises(ValueError, match="share a name"):
        steps.collect(loop=None)


on_postgres_only = pytest.mark.skipif(
    "connection.vendor != 'postgresql'",
    reason="Django never closes the SQLite test database's in-memory connection",
)


@on_postgres_only
def test_the_loop_keeps_its_database_connection_from_tick_to_tick():
    loop = SchedulerLoop(clock=lambda: T0)
    loop.run_once()
    session = connection.connection
    loop.run_once()
    assert connection.connection is session  # no new PostgreSQL session per tick


@on_postgres_only
def test_a_connection_found_broken_is_replaced_at_the_next_tick():
    loop = SchedulerLoop(clock=lambda: T0)
    loop.run_once()
    broken = connection.connection
    broken.close()  # as a database restart leaves it
    with pytest.raises(Exception):  # noqa: B017 - whichever error the driver raises
        loop.run_once()
    assert loop.run_once() == {}
    assert connection.connection is not broken


def test_run_forever_keeps_ticking_while_a_housekeeping_step_is_stuck():
    # Housekeeping runs on a thread of its own: a slow detector or retention
    # pass never delays the steps users wait for (firing, reaping).
    release = threading.Event()
    threads = {"often": set(), "stuck": set()}
    loop = SchedulerLoop(interval=0.01)

    def often(now):
        threads["often"].add(threading.get_ident())
        if release.is_set():
            loop.stop()
        return 0

    def stuck(now):
        # The first tick runs every step; the housekeeping thread the next.
        if calls.append(now) or len(calls) > 1:
            threads["stuck"].add(threading.get_ident())
            release.wait(10)
        return 0

    calls = []

    loop.steps = [steps.Step("often", often), steps.Step("stuck", stuck, every=0.01)]
    ticks = []
    original = loop.tick
    loop.tick = lambda now: ticks.append(now) or original(now)
    runner = threading.Thread(target=loop.run_forever)
    runner.start()
    deadline = time.monotonic() + 10
    while len(ticks) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    ticks_while_stuck = len(ticks)
    release.set()
    runner.join(10)

    assert ticks_while_stuck >= 20  # "stuck" has not returned meanwhile
    assert threads["stuck"] and threads["often"].isdisjoint(threads["stuck"])
    assert not runner.is_alive()


def test_the_housekeeping_thread_sleeps_until_its_next_step_is_due():
    loop = SchedulerLoop(clock=lambda: T0)
    loop.steps = [
        steps.Step("every_tick", lambda now: 0),
        steps.Step("often", lambda now: 0, every=5.0),
        steps.Step(
            "paced", lambda now: 0, every=2.0, until=lambda now: now + dt.timedelta(minutes=1)
        ),
    ]
    assert loop.housekeeping_due_in(T0) == 0.0  # never run: due now

    loop.last_run = {"often": T0, "paced": T0}
    loop.not_before = {"paced": T0 + dt.timedelta(seconds=30)}
    assert loop.housekeeping_due_in(T0 + dt.timedelta(seconds=4.7)) == pytest.approx(0.3)
    loop.last_run["often"] = T0 + dt.timedelta(seconds=4)
    assert loop.housekeeping_due_in(T0 + dt.timedelta(seconds=4)) == pytest.approx(5.0)


def test_a_job_edit_wakes_the_napping_housekeeping_thread(monkeypatch):
    loop = SchedulerLoop(clock=timezone.now)
    runs = []
    loop.steps = [steps.Step("paced", lambda now: runs.append(now) and 0, every=30.0)]
    loop.housekeeping_apart = True
    thread = loop.start_housekeeping()
    try:
        deadline = time.monotonic() + 5
        while not runs and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(runs) == 1  # its first run; the next is 30 s away
        loop.not_before["paced"] = timezone.now() + dt.timedelta(hours=1)
        loop.last_run["paced"] = timezone.now() - dt.timedelta(seconds=60)  # due but for `until`
        loop.job_saved()  # the edit clears what `until` said, and wakes the thread
        deadline = time.monotonic() + 15  # well before its next run in 30 s
        while len(runs) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(runs) == 2
    finally:
        loop.stop()
        thread.join(5)
    assert not thread.is_alive()  # stop() wakes it too


class HousekeepingKilled(BaseException):
    """Escapes the loop's own error handling, which catches Exception."""


def test_a_housekeeping_thread_that_dies_ends_the_loop_with_its_error():
    loop = SchedulerLoop(interval=0.01)
    calls = []

    def dies_second_time(now):
        calls.append(now)
        if len(calls) > 1:  # on the housekeeping thread
            raise HousekeepingKilled
        return 0

    loop.steps = [steps.Step("dies", dies_second_time, every=0.01)]
    finished = threading.Event()
    errors = []

    def run():
        try:
            loop.run_forever()
        except BaseException as e:  # noqa: BLE001 - what the test looks at
            errors.append(e)
        finished.set()

    threading.Thread(target=run, daemon=True).start()
    assert finished.wait(10)
    assert len(errors) == 1 and isinstance(errors[0], HousekeepingKilled)


def test_a_step_that_did_nothing_rests_for_its_idle_every():
    found = [0, 3, 0, 0]
    runs = []
    loop = SchedulerLoop(clock=lambda: T0)
    loop.steps = [
        steps.Step(
            "retention", lambda now: runs.append(now) or found.pop(0), every=5.0, idle_every=60.0
        )
    ]

    for seconds in (0, 5, 59, 60, 65, 70, 124, 125):
        loop.tick(T0 + dt.timedelta(seconds=seconds))

    # Nothing at 0: rests until 60. Work at 60: its cadence, 65. Nothing at 65: 125.
    assert runs == [T0 + dt.timedelta(seconds=s) for s in (0, 60, 65, 125)]


def test_every_retention_step_rests_after_a_pass_that_found_nothing():
    idle = {step.name: step.idle_every for step in SchedulerLoop().steps if step.idle_every}
    assert idle == {
        "audit_pruned": steps.IDLE_PRUNE_EVERY,
        "pruned": steps.IDLE_PRUNE_EVERY,
        "notifications_pruned": steps.IDLE_PRUNE_EVERY,
        "check_pings_pruned": steps.IDLE_PRUNE_EVERY,
    }


def test_a_tick_that_fires_nothing_and_the_sleep_after_it_read_the_jobs_once(monkeypatch):
    JobFactory(next_run_at=T0 + dt.timedelta(hours=1))
    loop = SchedulerLoop(clock=lambda: T0)
    loop.steps = [step for step in loop.steps if step.name == "fired"]
    waits = []
    monkeypatch.setattr(loop.stopping, "wait", lambda seconds: waits.append(seconds) or True)

    with CaptureQueriesContext(connection) as queries:
        loop.run_once()
        loop.sleep_until_due()

    reads = [q["sql"] for q in queries if 'FROM "scheduler_job"' in q["sql"]]
    # One read of the earliest due job (and the edit marker the sleep reads).
    assert len([sql for sql in reads if "next_run_at" in sql]) == 1
    assert not [sql for sql in reads if sql.startswith('SELECT 1 AS "a"')]
    assert waits  # it slept (at most the interval: the job is an hour away)


def test_a_resting_loop_reads_the_earliest_due_job_once_not_on_every_tick(monkeypatch):
    JobFactory(next_run_at=T0 + dt.timedelta(hours=1))
    loop = SchedulerLoop(interval=0.01, clock=lambda: T0)
    loop.steps = [step for step in loop.steps if step.name == "fired"]

    def earliest_reads(ticks):
        with CaptureQueriesContext(connection) as queries:
            for _ in range(ticks):
                loop.run_once()
                loop.sleep_until_due()  # nobody else commits (SQLite), no NOTIFY
        return len([q for q in queries if 'MIN("scheduler_job"."next_run_at")' in q["sql"]])

    assert earliest_reads(5) == 2  # the first, and once after the edit marker's first look
    assert earliest_reads(5) == 0
    # Once in a while it reads anyway: a writer that did not wake it.
    monkeypatch.setattr(loop_module, "EARLIEST_REREAD_EVERY", 0.0)
    assert earliest_reads(3) >= 3


def test_a_job_saved_while_the_loop_rests_is_fired_at_its_instant():
    job = JobFactory(next_run_at=T0 + dt.timedelta(hours=1))
    loop = SchedulerLoop(interval=0.05, clock=lambda: T0)
    for _ in range(2):
        loop.run_once()
        loop.sleep_until_due()
    assert loop.watched  # the next tick would trust what it read

    def edit():
        edited = Job.objects.get(pk=job.pk)
        edited.next_run_at = T0
        edited.save()
        connections.close_all()

    editor = threading.Thread(target=edit)
    editor.start()
    editor.join()
    saved = count_job_saved(loop)
    loop.interval = 60.0  # only the edit can end this sleep within the test
    started = time.monotonic()
    loop.sleep_until_due()
    assert saved == [1]  # the edit ended the sleep...
    assert time.monotonic() - started < loop.interval / 2  # ...not the interval
    assert loop.run_once() == {"fired": 1}


def test_a_tick_that_fires_reads_the_due_jobs_no_more_than_it_must():
    job = JobFactory(schedule="* * * * *", next_run_at=T0)
    loop = SchedulerLoop(clock=lambda: T0)
    loop.steps = [step for step in loop.steps if step.name == "fired"]

    with CaptureQueriesContext(connection) as queries:
        assert loop.run_once() == {"fired": 1}

    assert job.executions.get().scheduled_for == T0
    reads = [q["sql"] for q in queries if q["sql"].startswith("SELECT")]
    reads = [sql for sql in reads if re.search(r'FROM "?scheduler_job"?\s', sql)]
    # The earliest due job, the large instants near it (ticks.next_firing),
    # then the due jobs locked: no probe between (a round trip on every
    # firing tick, issue 16's tick during a burst).
    assert len(reads) == 3
    assert not [sql for sql in reads if sql.startswith('SELECT 1 AS "a"')]
