"""scheduler 0026 on a database holding executions: a stored execution gets
no trace context (its assignment carries none, it exports no span), it is
claimed and retried as before, and its retry starts a trace of its own."""

import datetime as dt
import re

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from dispatch import claims
from runners.models import Runner
from scheduler.models import Execution
from scheduler.runs import lifecycle
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0025_job_tags")]
AFTER = [("scheduler", "0026_execution_traceparent")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_stored_executions_have_no_trace_context_and_keep_working():
    old = migrate(BEFORE)
    job = old.get_model("scheduler", "Job").objects.create(
        name="report", schedule="*/5 * * * *", command="true", retries=1
    )
    old.get_model("scheduler", "Execution").objects.create(
        job=job, scheduled_for=T0, attempt=1, run_after=T0, created_at=T0, state="pending"
    )
    try:
        migrate(AFTER)
        migrate(everything())
        stored = Execution.objects.get()
        assert stored.traceparent == ""
        stored.full_clean()  # valid as it is

        runner = Runner.objects.create(
            name="web-1", session="s1", registered_at=T0, last_seen_at=T0
        )
        [claimed] = claims.claim(runner, "s1", 1, T0)
        assert claims.assignment(claimed)["traceparent"] == ""  # left out of the answer

        retry = lifecycle.settle(claimed, Execution.FAILED, T0, exit_code=1)
        assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", retry.traceparent)
    finally:
        migrate(everything())
