import datetime as dt
import itertools

import pytest
from django.db import connection

from notifications.models import Channel, Rule
from notifications.recording import record_event
from scheduler.models import Execution
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

T0 = dt.datetime(2026, 6, 1, 2, 0, tzinfo=dt.UTC)
# Each made execution its own instant (one execution per job, instant, attempt).
_instants = itertools.count()


def make_channel(name="ops-hook", **fields):
    fields.setdefault("kind", Channel.WEBHOOK)
    fields.setdefault("url", "https://hooks.example.com/croniq")
    return Channel.objects.create(name=name, **fields)


def make_rule(name, events, channels, **fields):
    rule = Rule.objects.create(name=name, events=list(events), **fields)
    rule.channels.set(channels)
    return rule


def failed_execution(job, runner=None, attempt=1, exit_code=3, at=T0):
    """A finished failed attempt of `job` (as settle leaves it)."""
    return ExecutionFactory(
        job=job,
        scheduled_for=T0 - dt.timedelta(days=1, seconds=next(_instants)),
        attempt=attempt,
        state=Execution.FAILED,
        runner=runner,
        exit_code=exit_code,
        claimed_at=at - dt.timedelta(seconds=42),
        finished_at=at,
    )


def failure(name="execution.failed", job=None, runner=None, at=T0, data=None, **job_fields):
    """Record a failure-type event of `job` (a new job when None), its
    execution run by `runner`."""
    job = job or JobFactory(**job_fields)
    execution = failed_execution(job, runner=runner, at=at)
    return record_event(name, at=at, job=job, execution=execution, data=data)


@pytest.fixture
def channel(db):
    return make_channel()


@pytest.fixture
def runner(db):
    return RunnerFactory(name="build-3", labels=["linux", "db"])


@pytest.fixture
def job(db):
    return JobFactory(name="billing-sync", owner="team-a", labels=["linux", "db"], retries=2)


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("SKIP LOCKED races need PostgreSQL; SQLite serialises writers")
