"""History retention at fixed instants: which executions and logs go, which stay."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEvent, Counter
from scheduler.firing import ticks
from scheduler.firing.loop import SchedulerLoop
from scheduler.housekeeping import prune_pacing, retention
from scheduler.models import Execution, LogChunk
from tests.factories import ExecutionFactory, JobFactory
from tests.test_configuration import run_check

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def retention_days(settings):
    settings.CRONIQ_EXECUTION_RETENTION_DAYS = 90
    settings.CRONIQ_LOG_RETENTION_DAYS = 30


def finished(job, days_ago, state=Execution.SUCCEEDED, attempt=1, chunks=1, at=None):
    """An execution of `job` for the instant `at` (default: finished minus a
    minute) that finished `days_ago` days before NOW, with log chunks."""
    end = NOW - days_ago * DAY
    instant = at or end - timedelta(minutes=1)
    execution = ExecutionFactory(
        job=job, scheduled_for=instant, attempt=attempt, state=state, finished_at=end
    )
    add_chunks(execution, chunks, at=instant)
    return execution


def add_chunks(execution, number, at):
    LogChunk.objects.bulk_create(
        LogChunk(execution=execution, seq=seq, data=f"line {seq}\n") for seq in range(number)
    )
    # created_at is auto_now_add: set the instant the output was written.
    LogChunk.objects.filter(execution=execution).update(created_at=at)


def ids(queryset):
    return set(queryset.values_list("id", flat=True))


def test_executions_past_the_retention_go_with_their_logs(db):
    job = JobFactory()
    old = finished(job, 100, chunks=3)
    older = finished(job, 95, state=Execution.FAILED)
    recent = finished(job, 10)

    pruned = retention.prune(NOW)

    assert ids(Execution.objects) == {recent.id}
    assert not LogChunk.objects.filter(execution_id__in=[old.id, older.id]).exists()
    assert pruned == retention.Pruned(executions=2, logs=4)


def test_an_execution_finished_at_the_cutoff_stays(db):
    job = JobFactory()
    boundary = finished(job, 90, chunks=0)
    finished(job, 1, chunks=0)
    assert retention.prune(NOW).executions == 0
    assert Execution.objects.filter(id=boundary.id).exists()
    assert retention.prune(NOW + timedelta(seconds=1)).executions == 1


def test_live_executions_are_never_pruned_however_old(db):
    job = JobFactory()
    long_ago = NOW - 200 * DAY
    pending = ExecutionFactory(job=job, scheduled_for=long_ago, state=Execution.PENDING)
    running = ExecutionFactory(
        job=job, scheduled_for=long_ago + DAY, state=Execution.RUNNING, claimed_at=long_ago
    )
    add_chunks(running, 2, at=long_ago)
    finished(job, 1)

    retention.prune(NOW)

    assert {pending.id, running.id} <= ids(Execution.objects)
    assert LogChunk.objects.filter(execution=running).count() == 2


def test_every_attempt_of_a_jobs_latest_finished_instant_is_kept(db):
    """A job that last ran long ago still shows its last result."""
    job = JobFactory()
    older = finished(job, 300)
    instant = NOW - 200 * DAY
    first = finished(job, 200, state=Execution.FAILED, at=instant)
    second = finished(job, 199, state=Execution.SUCCEEDED, attempt=2, at=instant)
    # A live execution is not a result: it does not release the latest one.
    ExecutionFactory(job=job, scheduled_for=NOW, state=Execution.PENDING)

    retention.prune(NOW)

    assert not Execution.objects.filter(id=older.id).exists()
    assert {first.id, second.id} <= ids(Execution.objects)


def test_attempts_of_an_instant_with_a_live_retry_are_kept(db):
    """The retry policy counts the earlier attempts of its instant."""
    job = JobFactory()
    instant = NOW - 120 * DAY
    lost = finished(job, 119, state=Execution.LOST, at=instant)
    ExecutionFactory(job=job, scheduled_for=instant, attempt=2, state=Execution.PENDING)
    other = finished(job, 100)
    finished(job, 1)

    assert retention.would_prune(NOW).executions == 1
    assert retention.prune(NOW).executions == 1

    assert Execution.objects.filter(id=lost.id).exists()
    assert not Execution.objects.filter(id=other.id).exists()


def test_logs_past_the_log_retention_go_and_the_execution_stays(db):
    job = JobFactory()
    quiet = finished(job, 40, chunks=3)
    recent = finished(job, 20, chunks=2)
    # Running for 40 days: its output is not "of a finished execution".
    started = NOW - 40 * DAY
    running = ExecutionFactory(
        job=job, scheduled_for=started, state=Execution.RUNNING, claimed_at=started
    )
    add_chunks(running, 2, at=started)

    pruned = retention.prune(NOW)

    assert pruned == retention.Pruned(executions=0, logs=3)
    assert Execution.objects.filter(id=quiet.id).exists()
    assert not LogChunk.objects.filter(execution=quiet).exists()
    assert LogChunk.objects.filter(execution=recent).count() == 2
    assert LogChunk.objects.filter(execution=running).count() == 2


def test_a_log_never_outlives_its_execution(db, settings):
    settings.CRONIQ_LOG_RETENTION_DAYS = 365
    job = JobFactory()
    kept = finished(job, 100, chunks=2)  # the job's latest result: its row stays
    assert retention.log_cutoff(NOW) == retention.execution_cutoff(NOW)
    assert retention.prune(NOW).logs == 2
    assert Execution.objects.filter(id=kept.id).exists()


def test_the_retention_settings_are_read_at_each_pass(db, settings):
    job = JobFactory()
    middle = finished(job, 50)
    finished(job, 1)
    assert retention.prune(NOW).executions == 0
    settings.CRONIQ_EXECUTION_RETENTION_DAYS = 45
    assert retention.prune(NOW).executions == 1
    assert not Execution.objects.filter(id=middle.id).exists()


def test_prune_stops_after_its_batches_and_the_next_call_continues_oldest_first(db):
    job = JobFactory()
    old = [finished(job, 100 + day, chunks=2) for day in range(5)]
    finished(job, 1)

    first = retention.prune(NOW, batch_size=2, max_batches=1)

    # One batch of two log chunks, one batch of two executions (the oldest)
    # with their remaining chunks.
    assert first.executions == 2
    assert ids(Execution.objects) & {e.id for e in old} == {e.id for e in old[:3]}
    retention.prune(NOW, batch_size=2, max_batches=1)
    retention.prune(NOW, batch_size=2, max_batches=1)
    assert not ids(Execution.objects) & {e.id for e in old}
    assert retention.prune(NOW, batch_size=2, max_batches=1) == retention.Pruned()


def test_a_budget_stops_a_kind_after_the_batch_that_used_it_up(db):
    job = JobFactory()
    for day in range(5):
        finished(job, 100 + day, chunks=0)
    finished(job, 1, chunks=0)
    assert retention.prune(NOW, batch_size=2, max_batches=10, budget=0).executions == 2
    assert retention.prune(NOW, batch_size=2, max_batches=10).executions == 3


def test_logs_wait_while_expired_executions_are_left(db):
    """Deleting an execution deletes its logs too: those go first."""
    job = JobFactory()
    for day in range(3):
        finished(job, 100 + day, chunks=0)
    quiet = finished(job, 40, chunks=2)
    finished(job, 1, chunks=0)

    assert retention.prune(NOW, batch_size=2, max_batches=1) == retention.Pruned(2, 0)
    assert LogChunk.objects.filter(execution=quiet).count() == 2
    assert retention.prune(NOW, batch_size=2, max_batches=1) == retention.Pruned(1, 2)


def test_deleting_old_executions_never_lets_an_old_instant_fire_again(db):
    """The trigger path reads Job.next_run_at, never the executions."""
    job = JobFactory(schedule="0 * * * *", next_run_at=NOW + timedelta(hours=1))
    for days in (200, 150, 100):
        finished(job, days, at=(NOW - days * DAY).replace(minute=0))
    finished(job, 1, at=(NOW - DAY).replace(minute=0))
    assert retention.prune(NOW).executions == 3

    assert ticks.trigger_due(NOW) == 0
    assert Execution.objects.filter(job=job).count() == 1


def test_pruned_rows_are_counted_for_metrics(db):
    job = JobFactory()
    finished(job, 100, chunks=2)
    finished(job, 40, chunks=1)
    finished(job, 1)
    retention.prune(NOW)
    assert Counter.objects.value_of(retention.PRUNED_COUNTER, "kind=executions") == 1
    assert Counter.objects.value_of(retention.PRUNED_COUNTER, "kind=logs") == 3


def test_would_prune_counts_without_deleting(db):
    job = JobFactory()
    finished(job, 100, chunks=2)
    finished(job, 40, chunks=1)
    finished(job, 1, chunks=4)
    before = (Execution.objects.count(), LogChunk.objects.count())
    expected = retention.would_prune(NOW)
    assert expected == retention.Pruned(executions=1, logs=3)
    assert (Execution.objects.count(), LogChunk.objects.count()) == before
    assert retention.prune(NOW) == expected


# Pacing: batches sized and rested by the time they take (a stepping clock)


class Clock:
    """A monotonic clock that moves `step` seconds each time it is read, and
    by whatever a pruner sleeps: every batch then takes exactly one step."""

    def __init__(self, step):
        self.now, self.step, self.slept = 0.0, step, []

    def __call__(self):
        self.now += self.step
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def test_a_pacer_grows_batches_at_most_twofold_towards_its_time_per_batch():
    pacer = prune_pacing.Pacer(seconds=0.01, smallest=10, largest=1000, first=50)
    assert pacer.next_size() == 50
    pacer.record(50, 0.001)  # 20 us a row: 500 rows would take 10 ms
    assert pacer.next_size() == 100
    pacer.record(100, 0.002)
    assert pacer.next_size() == 200
    pacer.record(200, 0.004)
    assert pacer.next_size() == 400
    pacer.record(400, 0.008)
    assert pacer.next_size() == 500
    pacer.record(500, 0.5)  # the database slowed down (1 ms a row): shrink at once
    assert pacer.next_size() == 10


def test_a_pacer_cuts_a_batch_to_the_budget_left_and_skips_one_that_cannot_fit():
    pacer = prune_pacing.Pacer(seconds=0.01, smallest=10, largest=1000, first=100)
    pacer.record(100, 0.01)  # 100 us a row
    assert pacer.next_size() == 100
    assert pacer.next_size(left=0.005) == 50
    assert pacer.next_size(left=0.0005) == 0  # not even 10 rows fit


def test_a_budget_is_spent_by_the_time_batches_take_not_by_their_rows(db):
    job = JobFactory()
    for day in range(12):
        finished(job, 100 + day, chunks=0)
    finished(job, 1, chunks=0)
    clock = Clock(step=0.004)
    pacer = prune_pacing.Pacer(seconds=0.01, smallest=2, largest=2, first=2)

    pruned = retention.prune(NOW, pacer=pacer, budget=0.05, clock=clock, sleep=clock.sleep)

    # Each look at the clock costs 4 ms: a batch takes 12 ms (from its start
    # to its end the clock is read three more times) and rests as long (50
    # ms on SQLite). Within 50 ms: two batches on PostgreSQL, one on SQLite
    # (its rest alone would overrun).
    expected = 1 if connection.vendor == "sqlite" else 2
    assert pruned.executions == 2 * expected
    assert len(clock.slept) == expected - 1


def test_a_pruner_rests_between_batches_as_long_as_each_took(db):
    job = JobFactory()
    for day in range(6):
        finished(job, 100 + day, chunks=0)
    finished(job, 1, chunks=0)
    clock = Clock(step=0.2)

    pruned = retention.prune(NOW, batch_size=2, clock=clock, sleep=clock.sleep)

    assert pruned.executions == 6
    # Three full batches and a last one that finds nothing: three rests,
    # each as long as a batch took (from its start to its end the clock was
    # read three more times: 0.6 s).
    assert clock.slept == [pytest.approx(0.6)] * 3


class Loop:
    """The loop as a pruner sees it: its heartbeat (the start of its last
    tick, written as the tick ends) and its next due instant."""

    def __init__(self, beat, due=None):
        self.beat, self.due = beat, due
        self.reads = 0
        self.ticks_after_reads = None  # the next tick's heartbeat after n reads

    def read_beat(self):
        self.reads += 1
        if self.ticks_after_reads is not None and self.reads > self.ticks_after_reads:
            return self.beat + timedelta(seconds=1)
        return self.beat

    def read_due(self, now):
        return self.due


def watch(loop, wall, clock):
    return prune_pacing.TickWatch(
        lambda: wall, clock, clock.sleep, read_beat=loop.read_beat, read_due=loop.read_due
    )


def test_a_batch_that_ends_before_the_next_tick_goes_at_once():
    loop = Loop(beat=NOW)
    clock = Clock(step=0)
    watch(loop, NOW + timedelta(seconds=0.5), clock).before_batch(estimate=0.02)
    assert clock.slept == []


def test_a_batch_that_could_meet_the_next_tick_waits_for_its_heartbeat():
    loop = Loop(beat=NOW)  # ticks once a second: next at NOW + 1 s
    loop.ticks_after_reads = 4  # that tick ends while the pruner waits
    clock = Clock(step=0)
    pruner = watch(loop, NOW + timedelta(seconds=0.985), clock)

    pruner.before_batch(estimate=0.02)

    assert clock.slept == [prune_pacing.TICK_POLL] * 4
    assert pruner.waited == 1


def test_a_due_job_brings_the_expected_tick_forward():
    loop = Loop(beat=NOW, due=NOW + timedelta(seconds=0.3))
    loop.ticks_after_reads = 2
    clock = Clock(step=0)
    watch(loop, NOW + timedelta(seconds=0.29), clock).before_batch(estimate=0.02)
    assert clock.slept == [prune_pacing.TICK_POLL] * 2  # not a second after the last tick


def test_a_tick_that_never_comes_is_waited_for_at_most_tick_wait_past_its_time():
    loop = Loop(beat=NOW)
    clock = Clock(step=0)
    watch(loop, NOW + timedelta(seconds=0.995), clock).before_batch(estimate=0.02)
    expected = 0.005 + prune_pacing.TICK_WAIT
    assert sum(clock.slept) == pytest.approx(expected, abs=prune_pacing.TICK_POLL)


def test_a_late_tick_is_not_waited_for():
    loop = Loop(beat=NOW, due=NOW + timedelta(seconds=0.5))
    clock = Clock(step=0)
    watch(loop, NOW + timedelta(seconds=0.6), clock).before_batch(estimate=0.02)
    assert clock.slept == []


def test_a_stopped_loop_is_not_waited_for():
    loop = Loop(beat=NOW - timedelta(minutes=5), due=NOW)
    clock = Clock(step=0)
    watch(loop, NOW, clock).before_batch(estimate=0.02)
    assert clock.slept == []


# The loop


@pytest.mark.django_db(transaction=True)
def test_the_loop_prunes_a_bounded_share_per_housekeeping_pass(monkeypatch):
    monkeypatch.setattr(prune_pacing, "_loop_pacer", prune_pacing.Pacer.fixed(3))
    monkeypatch.setattr(retention, "LOOP_MAX_BATCHES", 1)
    job = JobFactory(next_run_at=None)
    old = [finished(job, 100 + day, chunks=0) for day in range(5)]
    finished(job, 1, chunks=0)
    loop = SchedulerLoop(clock=lambda: NOW)

    assert loop.tick(NOW) == {"pruned": 3}
    assert loop.tick(NOW + timedelta(seconds=1)) == {}  # housekeeping not due yet
    assert loop.tick(NOW + timedelta(seconds=6)) == {"pruned": 2}
    assert not ids(Execution.objects) & {e.id for e in old}


@pytest.mark.django_db(transaction=True)
def test_after_a_pass_that_found_nothing_the_loop_prunes_again_a_minute_later(monkeypatch):
    monkeypatch.setattr(prune_pacing, "_loop_pacer", prune_pacing.Pacer.fixed(3))
    job = JobFactory(next_run_at=None)
    finished(job, 1, chunks=0)  # nothing past its retention
    loop = SchedulerLoop(clock=lambda: NOW)
    loop.steps = [step for step in loop.steps if step.name == "pruned"]

    assert loop.tick(NOW) == {}
    old = finished(job, 100, chunks=0)  # expired now, as if by the clock
    assert loop.tick(NOW + timedelta(seconds=6)) == {}  # not looked at yet
    assert loop.tick(NOW + timedelta(seconds=59)) == {}
    assert loop.tick(NOW + timedelta(seconds=60)) == {"pruned": 1}
    assert not Execution.objects.filter(id=old.id).exists()
    # A pass that pruned: the next comes at the step's own cadence (5 s).
    finished(job, 100, chunks=0)
    assert loop.tick(NOW + timedelta(seconds=65)) == {"pruned": 1}


def test_the_loop_leaves_the_backlog_to_a_running_prune_command(db):
    from audit.recording import beat

    job = JobFactory(next_run_at=None)
    old = finished(job, 100, chunks=0)
    finished(job, 1, chunks=0)
    beat(retention.PRUNER_BEAT, NOW - timedelta(seconds=5))  # the command, 5 s ago

    assert retention.prune_step(NOW, pacer=prune_pacing.Pacer.fixed(10)) == 0
    assert Execution.objects.filter(id=old.id).exists()
    # The command stopped beating 10 s ago: the loop takes over.
    later = NOW + timedelta(seconds=5)
    assert retention.prune_step(later, pacer=prune_pacing.Pacer.fixed(10)) == 1


def test_the_prune_command_beats_while_it_works(db):
    from audit.recording import last_beat

    job = JobFactory()
    finished(job, 100, chunks=0)
    finished(job, 1, chunks=0)
    with time_machine.travel(NOW, tick=False):
        call_command("prune")
    assert last_beat(retention.PRUNER_BEAT) == NOW


@pytest.mark.django_db(transaction=True)
def test_on_sqlite_the_command_checkpoints_the_wal_itself_between_batches():
    from django.test.utils import CaptureQueriesContext

    job = JobFactory()
    for day in range(3):
        finished(job, 100 + day, chunks=0)
    finished(job, 1, chunks=0)
    clock = Clock(step=0.001)
    with CaptureQueriesContext(connection) as queries:
        retention.prune(NOW, batch_size=1, announce=lambda: NOW, clock=clock, sleep=clock.sleep)
    checkpoints = [q for q in queries.captured_queries if "wal_checkpoint" in q["sql"]]
    assert len(checkpoints) == (3 if connection.vendor == "sqlite" else 0)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="only SQLite's pruner checkpoints")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("checkpoint", "rests"), [(0.03, [0.019] * 3), (0.06, [])])
def test_the_commands_checkpoint_counts_towards_its_rest(monkeypatch, checkpoint, rests):
    """A PASSIVE checkpoint takes no write lock: the time it takes is part of
    the rest after a batch (50 ms on SQLite), not added to it."""
    job = JobFactory()
    for day in range(3):
        finished(job, 100 + day, chunks=0)
    finished(job, 1, chunks=0)
    clock = Clock(step=0.001)

    def slow_checkpoint():
        clock.now += checkpoint

    monkeypatch.setattr(retention, "wal_checkpoint", slow_checkpoint)

    pruned = retention.prune(
        NOW, batch_size=1, announce=lambda: NOW, clock=clock, sleep=clock.sleep
    )

    # Each batch took 3 ms by the clock and rests 50 ms; reading the clock
    # around the checkpoint costs 2 ms more.
    assert pruned.executions == 3
    assert clock.slept == pytest.approx(rests)


@pytest.mark.django_db(transaction=True)
def test_a_pruner_skips_rows_another_one_holds_instead_of_waiting():
    if not connection.features.has_select_for_update_skip_locked:
        pytest.skip("SQLite serialises writers: there is no row lock to skip")
    job = JobFactory()
    held, *others = [finished(job, 100 + day) for day in range(4)]
    finished(job, 1)
    locked, release = threading.Event(), threading.Event()

    def other_pruner():
        with transaction.atomic():
            list(Execution.objects.select_for_update().filter(id=held.id))
            locked.set()
            release.wait(10)
        connection.close()

    thread = threading.Thread(target=other_pruner)
    thread.start()
    assert locked.wait(10)
    try:
        pruned = retention.prune(NOW, batch_size=10)
    finally:
        release.set()
        thread.join()

    # A pruner that waited for the lock would have had it once the other
    # gave up (10 s), and pruned the held row too.
    assert pruned.executions == 3
    assert Execution.objects.filter(id=held.id).exists()
    assert not Execution.objects.filter(id__in=[e.id for e in others]).exists()


# The command


def test_prune_dry_run_prints_the_counts_and_changes_nothing(db, capsys):
    job = JobFactory()
    finished(job, 100, chunks=2)
    finished(job, 40, chunks=1)
    finished(job, 1)
    before = (Execution.objects.count(), LogChunk.objects.count(), AuditEvent.objects.count())

    with time_machine.travel(NOW, tick=False):
        call_command("prune", "--dry-run")

    out = capsys.readouterr().out
    assert "would prune 1 execution(s) and 3 log chunk(s)" in out
    assert "nothing deleted" in out
    assert (Execution.objects.count(), LogChunk.objects.count(), AuditEvent.objects.count()) == (
        before
    )


def test_prune_deletes_and_records_one_audit_event_for_the_pass(db, capsys):
    job = JobFactory()
    for days in (100, 101, 102):
        finished(job, days, chunks=2)
    finished(job, 1)

    with time_machine.travel(NOW, tick=False):
        call_command("prune")

    assert "pruned 3 execution(s) and 6 log chunk(s)" in capsys.readouterr().out
    assert Execution.objects.count() == 1
    event = AuditEvent.objects.get(action="history.pruned")
    assert event.data["executions"] == 3
    assert event.data["logs"] == 6
    assert event.data["executions_finished_before"] == (NOW - 90 * DAY).isoformat()


# Settings

SHOW_RETENTION = (
    "-c",
    "import django; django.setup(); from django.conf import settings; "
    "print(settings.CRONIQ_EXECUTION_RETENTION_DAYS, settings.CRONIQ_LOG_RETENTION_DAYS)",
)


def test_the_retention_settings_come_from_the_environment(tmp_path):
    database = f"sqlite:///{tmp_path}/c.db"
    defaults = run_check(*SHOW_RETENTION, DEBUG="1", DATABASE_URL=database)
    assert defaults.stdout.split() == ["90", "30"], defaults.stderr
    chosen = run_check(
        *SHOW_RETENTION,
        DEBUG="1",
        DATABASE_URL=database,
        CRONIQ_EXECUTION_RETENTION_DAYS="400",
        CRONIQ_LOG_RETENTION_DAYS="7",
    )
    assert chosen.stdout.split() == ["400", "7"], chosen.stderr


def test_a_retention_below_one_day_stops_start_up_naming_the_variable(tmp_path):
    result = run_check(DEBUG="1", CRONIQ_LOG_RETENTION_DAYS="0")
    assert result.returncode == 2
    assert "CRONIQ_LOG_RETENTION_DAYS" in result.stderr


def test_an_expired_execution_goes_with_its_closed_dead_letter_and_a_replay_forgets_it(db):
    from scheduler.triage.dead_letters import DeadLetter

    job = JobFactory()
    gave_up = finished(job, 100, state=Execution.FAILED)
    replay = finished(job, 99, state=Execution.FAILED, attempt=2, at=gave_up.scheduled_for)
    kept = finished(job, 10, state=Execution.FAILED)
    replayed = DeadLetter.objects.create(
        execution=kept, reason="failed", landed_at=NOW, replayed_at=NOW, replayed_execution=replay
    )
    DeadLetter.objects.create(
        execution=gave_up, reason="failed", landed_at=NOW - 100 * DAY, discarded_at=NOW
    )

    assert retention.prune(NOW).executions == 2

    assert list(DeadLetter.objects.values_list("pk", flat=True)) == [replayed.pk]
    replayed.refresh_from_db()
    assert (replayed.replayed_execution, replayed.status) == (None, DeadLetter.REPLAYED)


def test_executions_others_point_at_are_pruned_and_the_pointers_let_go(transactional_db):
    """Rows pointing at a pruned execution (a trigger's idempotency key, a
    chained run's upstream, a notification event) stop pointing at it: the
    raw DELETE runs no cascade, and a dangling pointer makes the database
    refuse the commit, every pass, so retention would stall."""
    from notifications.models import Event
    from scheduler.models import TriggerKey

    job = JobFactory()
    upstream = finished(job, 120)
    keyed = finished(job, 110)
    TriggerKey.objects.create(job=job, key="deploy-42", execution=keyed, created_at=NOW - 110 * DAY)
    chained = finished(job, 100)
    Execution.objects.filter(pk=chained.pk).update(upstream=upstream)
    downstream = finished(job, 10)
    Execution.objects.filter(pk=downstream.pk).update(upstream=chained)
    event = Event.objects.create(name="execution.failed", at=NOW, execution=keyed)

    pruned = retention.prune(NOW)

    assert pruned.executions == 3
    assert ids(Execution.objects) == {downstream.id}
    assert Execution.objects.get(pk=downstream.pk).upstream_id is None
    assert not TriggerKey.objects.exists()
    assert Event.objects.get(pk=event.pk).execution_id is None


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's planner, after ANALYZE")
def test_letting_go_of_pruned_runs_reads_the_executions_through_their_indexes(db):
    """Few runs are chained, so SQLite's statistics say nearly every run has
    the same upstream (none): an UPDATE filtered on it was planned as a scan
    of the whole table, once a batch (three quarters of `manage.py prune`'s
    time at 1,000,000 runs)."""
    job = JobFactory()
    runs = [finished(job, 100 + n, chunks=0) for n in range(50)]
    with connection.cursor() as cursor:
        # The statistics of a large table (1,000,000 runs, none chained), as
        # `ANALYZE` or `PRAGMA optimize` record them, then loaded.
        cursor.execute("ANALYZE")
        cursor.execute(
            "UPDATE sqlite_stat1 SET stat = '1000000 ' || (CASE WHEN idx LIKE %s"
            " THEN '1000000' ELSE '1' END) WHERE tbl = %s",
            ["%upstream%", Execution._meta.db_table],
        )
        cursor.execute("ANALYZE sqlite_master")
    with CaptureQueriesContext(connection) as captured:
        retention.let_go_of([run.pk for run in runs[:10]])
    table = Execution._meta.db_table
    plans = []
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            if f'"{table}"' in query["sql"]:
                cursor.execute("EXPLAIN QUERY PLAN " + query["sql"])
                plans += [row[-1] for row in cursor.fetchall()]
        cursor.execute("DELETE FROM sqlite_stat1")  # the other tests plan without them
        cursor.execute("ANALYZE sqlite_master")
    assert plans  # the upstream pointers were looked for
    assert not [plan for plan in plans if plan.startswith(f"SCAN {table}")]
