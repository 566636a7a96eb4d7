"""0016 adds run_on: all to a database holding jobs and executions:
existing jobs run on one runner without stagger, existing executions are
pinned to no runner, invariant 1 still refuses a second row of an
(job, instant, attempt) that is pinned to none while it takes one row per
runner of a run-on-all occurrence, and the loop fires the old job as before."""

import datetime as dt

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from scheduler.firing import ticks
from scheduler.models import Execution, Job
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0015_chains")]
AFTER = [("scheduler", "0016_run_on_all")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
NEXT = T0 + dt.timedelta(minutes=5)


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def refused(**fields):
    """True when invariant 1 refuses an execution of `fields`."""
    try:
        with transaction.atomic():
            Execution.objects.create(run_after=T0, created_at=T0, **fields)
    except IntegrityError:
        return True
    return False


def insert_without_pin(job, attempt):
    """An execution inserted as a wave-one process does: no pinned_to."""
    at = connection.ops.adapt_datetimefield_value(T0)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Execution._meta.db_table}"
            " (job_id, scheduled_for, attempt, trigger, state, singleton, run_after, session,"
            "  lease, created_at, error, lost_reason, log_size, log_truncated)"
            " VALUES (%s, %s, %s, 'schedule', 'pending', %s, %s, '', 0, %s, '', '', 0, %s)",
            [job.pk, at, attempt, False, at, at, False],
        )
    return Execution.objects.get(job=job, scheduled_for=T0, attempt=attempt).pk


def test_wave_one_rows_run_on_one_runner_and_keep_invariant_one():
    old = migrate(BEFORE)
    OldJob = old.get_model("scheduler", "Job")
    OldExecution = old.get_model("scheduler", "Execution")
    job = OldJob.objects.create(
        name="report", schedule="*/5 * * * *", command="true", retries=1, next_run_at=T0
    )
    first = OldExecution.objects.create(
        job=job, scheduled_for=T0, attempt=1, run_after=T0, created_at=T0, state="failed",
        exit_code=1,
    )  # fmt: skip
    retry = OldExecution.objects.create(
        job=job, scheduled_for=T0, attempt=2, trigger="retry", run_after=T0, created_at=T0,
        state="succeeded", exit_code=0,
    )  # fmt: skip
    try:
        new = migrate(AFTER)
        upgraded = new.get_model("scheduler", "Job").objects.get(name="report")
        assert (upgraded.run_on, upgraded.stagger) == ("one", None)
        runs = new.get_model("scheduler", "Execution").objects.order_by("attempt")
        assert [(r.pk, r.attempt, r.pinned_to) for r in runs] == [
            (first.pk, 1, ""),
            (retry.pk, 2, ""),
        ]
        migrate(everything())

        job = Job.objects.get(name="report")
        assert (job.run_on, job.stagger) == (Job.ONE, None)
        # A second row of an instant's attempt, pinned to no runner: refused.
        assert refused(job=job, scheduled_for=T0, attempt=1)
        assert refused(job=job, scheduled_for=T0, attempt=2, pinned_to="")
        # A row written by code that knows nothing of pinned_to gets the
        # column's default, '', and is refused the same way.
        assert Execution.objects.get(pk=insert_without_pin(job, attempt=3)).pinned_to == ""
        with pytest.raises(IntegrityError), transaction.atomic():
            insert_without_pin(job, attempt=3)
        # One row per runner for the same (job, instant, attempt): accepted.
        for name in ("fleet-a", "fleet-b"):
            assert not refused(job=job, scheduled_for=T0, attempt=1, pinned_to=name)
        assert refused(job=job, scheduled_for=T0, attempt=1, pinned_to="fleet-a")
        assert Execution.objects.filter(job=job, scheduled_for=T0, attempt=1).count() == 3

        # The loop fires the old job as before: one run, pinned to no runner.
        Job.objects.filter(pk=job.pk).update(next_run_at=NEXT)
        assert ticks.trigger_due(NEXT) == 1
        fired = Execution.objects.get(job=job, scheduled_for=NEXT)
        assert (fired.state, fired.attempt, fired.pinned_to) == (Execution.PENDING, 1, "")
        assert Job.objects.get(pk=job.pk).next_run_at == NEXT + dt.timedelta(minutes=5)
    finally:
        migrate(everything())


def test_the_loop_racing_a_wave_one_row_of_its_instant_adds_none():
    """Another loop (still on wave one) inserted the instant's run first:
    invariant 1 refuses this loop's row, as before 0016."""
    old = migrate(BEFORE)
    OldJob = old.get_model("scheduler", "Job")
    job = OldJob.objects.create(
        name="report", schedule="*/5 * * * *", command="true", next_run_at=NEXT
    )
    earlier = old.get_model("scheduler", "Execution").objects.create(
        job=job, scheduled_for=NEXT, run_after=NEXT, created_at=T0
    )
    try:
        migrate(everything())
        assert ticks.trigger_due(NEXT) == 0  # it created none, and says so
        assert list(Execution.objects.values_list("pk", "pinned_to")) == [(earlier.pk, "")]
        assert Job.objects.get().next_run_at == NEXT + dt.timedelta(minutes=5)
    finally:
        migrate(everything())
