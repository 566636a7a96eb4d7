"""Property: for random jobs (overlap policy, limits, concurrency group,
period, duration) and runners, simulated minute by minute over an hour
with the real fire, claim and settle code, no job runs more than its
policy allows, no group runs more than its budget, a group's work is
claimed oldest first, and nothing is lost: every occurrence is run,
waiting, or recorded as skipped or replaced, with an audit event.

CRONIQ_PROPERTY_EXAMPLES raises the number of examples (default 10).
"""

import datetime as dt
import os
from collections import Counter

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.models import AuditEvent
from dispatch import claims
from scheduler.firing import ticks
from scheduler.models import ConcurrencyGroup, Execution, Job
from scheduler.runs import lifecycle
from tests.factories import JobFactory, RunnerFactory

T0 = dt.datetime(2026, 6, 1, 0, 0, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)
HOURS = 1
EXAMPLES = int(os.environ.get("CRONIQ_PROPERTY_EXAMPLES", "10"))

jobs_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "period": st.integers(1, 4),
            "duration": st.integers(1, 7),
            "overlap": st.sampled_from([Job.ALLOW, Job.SKIP, Job.QUEUE, Job.REPLACE]),
            "max_concurrent": st.integers(1, 3),
            "max_queue": st.one_of(st.none(), st.integers(0, 3)),
            "group": st.one_of(st.none(), st.integers(0, 1)),
        }
    ),
    min_size=1,
    max_size=5,
)


@pytest.mark.django_db
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    specs=jobs_strategy,
    budgets=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    capacities=st.lists(st.integers(1, 3), min_size=1, max_size=3),
)
def test_limits_budgets_and_order_hold_and_nothing_is_lost(specs, budgets, capacities):
    with transaction.atomic():
        simulate(specs, budgets, capacities)
        transaction.set_rollback(True)


def simulate(specs, budgets, capacities):
    groups = [
        ConcurrencyGroup.objects.create(name=f"group-{i}", max_concurrent=budget)
        for i, budget in enumerate(budgets)
    ]
    jobs, duration = [], {}
    for i, spec in enumerate(specs):
        queue = spec["overlap"] == Job.QUEUE
        job = JobFactory(
            name=f"job-{i}",
            schedule=f"*/{spec['period']} * * * *",
            next_run_at=T0,
            overlap=spec["overlap"],
            max_concurrent=spec["max_concurrent"] if queue else None,
            max_queue=spec["max_queue"] if queue else None,
            concurrency_group=None if spec["group"] is None else groups[spec["group"]],
        )
        jobs.append(job)
        duration[job.pk] = spec["duration"] * MINUTE
    runners = [RunnerFactory(capacity=c, labels=[]) for c in capacities]
    end = T0 + HOURS * 60 * MINUTE
    now = T0
    while now <= end:
        settle_due(now, duration)
        ticks.trigger_due(now)
        for runner in runners:
            busy = Execution.objects.filter(runner=runner, state=Execution.RUNNING).count()
            claimed = claims.claim(runner, runner.session, runner.capacity - busy, now)
            check_group_order(claimed, now)
        check_limits(jobs, groups)
        now += MINUTE
    check_nothing_lost(jobs, end)


def settle_due(now, duration):
    """Runs whose time is up succeed; a run asked to stop (replaced) is
    killed by its runner at the next heartbeat, here the next minute."""
    for execution in Execution.objects.filter(state=Execution.RUNNING):
        if execution.cancel_requested_at is not None and execution.cancel_requested_at < now:
            lifecycle.settle(execution, Execution.CANCELLED, now)
        elif execution.claimed_at + duration[execution.job_id] <= now:
            lifecycle.settle(execution, Execution.SUCCEEDED, now, exit_code=0)


def check_limits(jobs, groups):
    running = Counter(
        Execution.objects.filter(state=Execution.RUNNING).values_list("job_id", flat=True)
    )
    for job in jobs:
        limit = job.concurrency_limit
        if limit is not None:
            assert running[job.pk] <= limit, f"{job.name} ({job.overlap}) runs {running[job.pk]}"
    for group in groups:
        in_group = sum(running[job.pk] for job in jobs if job.concurrency_group_id == group.pk)
        assert in_group <= group.max_concurrent, f"{group.name} runs {in_group}"


def check_group_order(claimed, now):
    """FIFO within a group: nothing claimed is younger than group work left ready."""
    for group_id in {e.job.concurrency_group_id for e in claimed} - {None}:
        taken = max(
            claims.claim_order(e) for e in claimed if e.job.concurrency_group_id == group_id
        )
        left = claims.ready_executions(now).filter(job__concurrency_group=group_id)
        for execution in left:
            assert claims.claim_order(execution) > taken, "a younger run of the group went first"


def check_nothing_lost(jobs, end):
    for job in jobs:
        expected = set()
        instant = T0
        while instant <= end:
            expected.add(instant)
            instant = job.next_fire_after(instant)
        firsts = job.executions.filter(attempt=1)
        assert set(firsts.values_list("scheduled_for", flat=True)) == expected, job.name
        for execution in job.executions.filter(state__in=[Execution.SKIPPED, Execution.CANCELLED]):
            why = {Execution.SKIPPED: ["execution.skipped"]}.get(
                execution.state, ["execution.superseded", "execution.replaced"]
            )
            assert AuditEvent.objects.filter(
                action__in=why, target_id=str(execution.pk)
            ).exists(), f"{execution} {execution.state} without an audit event"
            if execution.state == Execution.CANCELLED:
                assert job.overlap == Job.REPLACE
