"""A cycle of chains that got into the database past the save checks stops
after MAX_CHAIN_DEPTH chained runs: the next one is not created, and the
skip is audited and logged with its reason."""

import datetime as dt
import logging

import pytest

from audit.models import AuditEvent
from scheduler.models import Execution, Job
from scheduler.runs import chains, lifecycle
from scheduler.runs.chains import MAX_CHAIN_DEPTH
from tests.factories import ExecutionFactory, JobFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 2, 0, tzinfo=dt.UTC)
LATER = T0 + dt.timedelta(minutes=5)
TOO_DEEP = "the chain is more than 100 runs deep (a cycle of chains?)"


def stored_cycle(field, **fields):
    """Jobs a and b chaining to each other on `field`, written straight into
    the database as a cycle the save checks would refuse."""
    a = JobFactory(name="a", schedule="0 0 1 1 *", **fields)
    b = JobFactory(name="b", schedule="0 0 1 1 *", **fields)
    Job.objects.filter(pk=a.pk).update(**{field: ["b"]})
    Job.objects.filter(pk=b.pk).update(**{field: ["a"]})
    return ExecutionFactory(job=a, scheduled_for=T0, state=Execution.RUNNING, lease=1)


def hold(run):
    """The pending `run` as a runner holds it: running under lease 1."""
    Execution.objects.filter(pk=run.pk).update(state=Execution.RUNNING, lease=1)
    return Execution.objects.get(pk=run.pk)


def newest_pending():
    return Execution.objects.filter(state=Execution.PENDING).order_by("-id").first()


def test_a_stored_cycle_stops_after_the_deepest_chain(caplog):
    run = stored_cycle("on_success")
    created = 0
    with caplog.at_level(logging.WARNING, logger="scheduler.runs.chains"):
        while run is not None and created <= MAX_CHAIN_DEPTH:
            lifecycle.settle(run, Execution.SUCCEEDED, LATER, exit_code=0)
            run = newest_pending()
            if run is not None:
                created += 1
                run = hold(run)

    assert created == MAX_CHAIN_DEPTH
    assert Execution.objects.filter(trigger=Execution.CHAIN).count() == MAX_CHAIN_DEPTH
    deepest = Execution.objects.filter(trigger=Execution.CHAIN).order_by("-id").first()
    assert chains.chain_depth(deepest, MAX_CHAIN_DEPTH + 5) == MAX_CHAIN_DEPTH
    skipped = AuditEvent.objects.get(action="job.chained", data__skipped=TOO_DEEP)
    assert (skipped.data["upstream"], skipped.data["job"]) == (deepest.pk, "b")
    assert TOO_DEEP in caplog.text


def test_chain_depth_counts_the_links_above_a_run():
    job = JobFactory()
    first = ExecutionFactory(job=job, scheduled_for=T0)
    second = ExecutionFactory(job=job, scheduled_for=T0, attempt=2, upstream=first)
    third = ExecutionFactory(job=job, scheduled_for=T0, attempt=3, upstream=second)
    assert [chains.chain_depth(r, 10) for r in (first, second, third)] == [0, 1, 2]
    assert chains.chain_depth(third, 1) == 1  # counted no further than asked
