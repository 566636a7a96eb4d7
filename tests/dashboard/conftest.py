"""A small world for the dashboard tests: jobs, executions, runners, users."""

from datetime import UTC, datetime, timedelta
from itertools import count

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from runners.models import Runner
from scheduler.models import Execution, Job, LogChunk

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
_names = count(1)


CRONIQ_APPS = ["audit", "calendars", "scheduler", "runners", "notifications", "checks"]


@pytest.fixture
def staff_user(db):
    """A staff user who may read everything (as the "Croniq viewers" group)."""
    user = get_user_model().objects.create_user("operator", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label__in=CRONIQ_APPS, codename__startswith="view_"
        )
    )
    return user


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client


@pytest.fixture
def make_job(db):
    def make(name=None, **fields):
        fields.setdefault("schedule", "*/5 * * * *")
        fields.setdefault("command", "echo hello")
        return Job.objects.create(name=name or f"job-{next(_names)}", **fields)

    return make


@pytest.fixture
def make_execution(db):
    def make(job, scheduled_for=NOW, **fields):
        fields.setdefault("state", Execution.SUCCEEDED)
        fields.setdefault("run_after", scheduled_for)
        fields.setdefault("created_at", scheduled_for)
        return Execution.objects.create(job=job, scheduled_for=scheduled_for, **fields)

    return make


@pytest.fixture
def make_history(make_execution):
    """`n` runs of `job`, one a minute, the newest at NOW; every 4th failed."""

    def make(job, n, newest=NOW):
        runs = []
        for i in range(n):
            at = newest - timedelta(minutes=i)
            state = Execution.FAILED if i % 4 == 3 else Execution.SUCCEEDED
            runs.append(
                make_execution(
                    job,
                    at,
                    state=state,
                    claimed_at=at + timedelta(seconds=1),
                    finished_at=at + timedelta(seconds=1 + i % 7),
                    exit_code=0 if state == Execution.SUCCEEDED else 1,
                )
            )
        return runs

    return make


@pytest.fixture
def make_runner(db):
    def make(name=None, **fields):
        fields.setdefault("session", "s1")
        fields.setdefault("registered_at", NOW)
        fields.setdefault("last_seen_at", NOW)
        return Runner.objects.create(name=name or f"runner-{next(_names)}", **fields)

    return make


@pytest.fixture
def add_log(db):
    def add(execution, *lines):
        start = execution.log_chunks.count()
        for seq, line in enumerate(lines, start):
            LogChunk.objects.create(execution=execution, seq=seq, data=line)

    return add
