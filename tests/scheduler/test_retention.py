"""History retention at fixed instants: which executions and logs go, which stay."""

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection, transaction

from audit.models import AuditEvent, Counter
from scheduler import retention, ticks
from scheduler.loop import SchedulerLoop
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


# The loop


@pytest.mark.django_db(transaction=True)
def test_the_loop_prunes_a_bounded_share_per_housekeeping_pass(monkeypatch):
    monkeypatch.setattr(retention, "LOOP_BATCH_SIZE", 3)
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
        started = time.monotonic()
        pruned = retention.prune(NOW, batch_size=10)
        waited = time.monotonic() - started
    finally:
        release.set()
        thread.join()

    assert waited < 5
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
