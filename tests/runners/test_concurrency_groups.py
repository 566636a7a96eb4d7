"""Concurrency groups at claim time: a shared budget of running executions,
FIFO within the group, no starvation outside it, and two claimers taking
turns on PostgreSQL."""

import asyncio
import datetime as dt
import threading

import pytest
from django.db import connection, connections

from dispatch import claims
from dispatch.hub import Waiter
from scheduler.models import ConcurrencyGroup, Execution
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def ready(job, seconds_ago):
    at = NOW - dt.timedelta(seconds=seconds_ago)
    return ExecutionFactory(job=job, scheduled_for=at)


def claim(runner, capacity=10, now=NOW):
    return claims.claim(runner, runner.session, capacity, now)


@pytest.fixture
def group(db):
    return ConcurrencyGroup.objects.create(name="vendor-api", max_concurrent=2)


def test_a_group_runs_no_more_than_its_budget_oldest_first(group):
    jobs = [JobFactory(concurrency_group=group) for _ in range(3)]
    waiting = [ready(jobs[i % 3], 60 - i) for i in range(5)]
    runner = RunnerFactory(capacity=10)
    assert [e.pk for e in claim(runner)] == [waiting[0].pk, waiting[1].pk]
    assert claim(runner) == []  # full: the others stay pending
    finished = Execution.objects.get(pk=waiting[0].pk)
    Execution.objects.filter(pk=finished.pk).update(state=Execution.SUCCEEDED)
    assert [e.pk for e in claim(runner)] == [waiting[2].pk]


def test_work_outside_a_full_group_is_not_held_back(group):
    grouped = JobFactory(concurrency_group=group)
    for i in range(20):
        ready(grouped, 100 - i)  # older than the free job's run
    free = ready(JobFactory(), 1)
    runner = RunnerFactory(capacity=3)
    first = claim(runner, capacity=3)
    assert [e.job_id for e in first].count(grouped.pk) == 2
    assert free.pk in [e.pk for e in first]
    assert claim(runner, capacity=3) == []


def test_the_hub_deals_a_group_budget_across_waiting_polls(group):
    grouped = JobFactory(concurrency_group=group)
    for i in range(6):
        ready(grouped, 60 - i)
    runners = [RunnerFactory(capacity=2) for _ in range(4)]
    loop = asyncio.new_event_loop()
    try:
        waiters = [Waiter(loop, r.pk, r.token, r.session, None) for r in runners]
        served = claims.serve_waiters(waiters, NOW, NOW)
    finally:
        loop.close()
    handed = sum(len(h.assignments) for _, h in served)
    assert handed == 2
    assert Execution.objects.filter(state=Execution.RUNNING).count() == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_claimers_at_once_never_overrun_the_budget():
    if connection.vendor != "postgresql":
        pytest.skip("row locks across connections need PostgreSQL")
    group = ConcurrencyGroup.objects.create(name="licence", max_concurrent=2)
    jobs = [JobFactory(concurrency_group=group) for _ in range(5)]
    for i in range(40):
        ready(jobs[i % 5], 100 - i)
    runners = [RunnerFactory(capacity=3) for _ in range(8)]
    start = threading.Barrier(len(runners))

    def poll(runner):
        try:
            start.wait()
            for _ in range(3):
                claim(runner, capacity=3)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=poll, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Execution.objects.filter(state=Execution.RUNNING).count() == 2
