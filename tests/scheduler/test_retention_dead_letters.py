"""Execution retention keeps an open dead letter, and the execution it
points at, until an operator replays or discards it: nothing an operator
has not looked at disappears silently."""

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.housekeeping import retention
from scheduler.models import Execution
from scheduler.triage import dead_letter_actions
from scheduler.triage.dead_letters import DeadLetter
from tests.factories import ExecutionFactory, JobFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def retention_days(settings):
    settings.CRONIQ_EXECUTION_RETENTION_DAYS = 90
    settings.CRONIQ_LOG_RETENTION_DAYS = 30


def gave_up(job, days_ago):
    """A failed execution of `job`, finished `days_ago` days before NOW,
    filed as an open dead letter."""
    end = NOW - days_ago * DAY
    execution = ExecutionFactory(
        job=job,
        scheduled_for=end - timedelta(minutes=1),
        state=Execution.FAILED,
        finished_at=end,
    )
    DeadLetter.objects.create(execution=execution, reason=DeadLetter.FAILED, landed_at=end)
    return execution


def succeeded(job, days_ago):
    end = NOW - days_ago * DAY
    return ExecutionFactory(
        job=job,
        scheduled_for=end - timedelta(minutes=1),
        state=Execution.SUCCEEDED,
        finished_at=end,
    )


def kept_ids():
    return set(Execution.objects.values_list("id", flat=True))


def test_an_open_dead_letter_and_its_execution_outlive_the_retention():
    job = JobFactory()
    open_one = gave_up(job, 200)
    old = succeeded(job, 100)
    latest = succeeded(job, 1)

    assert retention.would_prune(NOW).executions == 1
    pruned = retention.prune(NOW)

    assert pruned.executions == 1
    assert kept_ids() == {open_one.id, latest.id}
    assert old.id not in kept_ids()
    assert DeadLetter.objects.get().status == DeadLetter.OPEN


def test_open_dead_letters_never_stop_the_pruner_short_of_the_rows_past_them():
    """More open dead letters among the oldest rows than a batch holds: the
    rows after them go all the same."""
    job = JobFactory()
    open_ones = {gave_up(job, 300 - day).id for day in range(5)}
    expired = [succeeded(job, 150 - day) for day in range(3)]
    latest = succeeded(job, 1)

    pruned = retention.prune(NOW, batch_size=2)

    assert pruned.executions == len(expired)
    assert kept_ids() == {*open_ones, latest.id}


@pytest.mark.parametrize("close", ["discard", "replay"])
def test_a_dead_letter_closed_by_an_operator_goes_with_its_execution(close):
    job = JobFactory()
    execution = gave_up(job, 200)
    succeeded(job, 1)
    dead_letter = DeadLetter.objects.get()
    if close == "discard":
        dead_letter_actions.discard(DeadLetter.objects.all(), NOW, actor=None)
    else:
        dead_letter_actions.replay(dead_letter, NOW, actor=None, force=True)
        # The replay's own run finishes long ago too; only the job's latest
        # finished instant (NOW minus a day) stays.
        Execution.objects.filter(attempt=2).update(
            state=Execution.SUCCEEDED, finished_at=NOW - 150 * DAY
        )

    retention.prune(NOW)

    assert not Execution.objects.filter(scheduled_for=execution.scheduled_for).exists()
    assert not DeadLetter.objects.exists()
