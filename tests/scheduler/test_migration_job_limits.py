"""scheduler 0027 on a database holding jobs: each gets no limits (its log
cut at the server's CRONIQ_LOG_LIMIT as before, no memory or CPU limit,
exit code 0 alone a success), stays valid, and is still claimed by runners
whose agents predate limits, its assignment as before but for `max_output`."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from dispatch import claims
from runners.models import Runner
from scheduler.models import Execution, Job
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0026_execution_traceparent"), ("runners", "0004_runner_features")]
AFTER = [("scheduler", "0027_job_limits")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_stored_jobs_get_no_limits_and_keep_running_on_older_agents(settings):
    settings.CRONIQ_LOG_LIMIT = 2 * 1024 * 1024
    old = migrate(BEFORE)
    jobs = old.get_model("scheduler", "Job").objects
    shell = jobs.create(
        name="report", schedule="*/5 * * * *", command="python report.py", labels=["linux"],
        stdin="in\n",
    )  # fmt: skip
    jobs.create(
        name="ping", schedule="@hourly", kind="http", http={"url": "https://example.com/"},
        labels=["linux"],
    )  # fmt: skip
    old.get_model("scheduler", "Execution").objects.create(
        job=shell, scheduled_for=T0, attempt=1, run_after=T0, created_at=T0, state="pending",
        trigger="manual",
    )  # fmt: skip
    old.get_model("runners", "Runner").objects.create(
        name="web-1", labels=["linux"], session="s1", registered_at=T0, last_seen_at=T0,
        features=["stdin", "run_as", "http"],
    )  # fmt: skip
    try:
        migrate(AFTER)
        migrate(everything())
        for upgraded in Job.objects.order_by("name"):
            assert (upgraded.max_output, upgraded.on_max_output) == (None, "truncate")
            assert (upgraded.max_memory, upgraded.max_cpu_seconds) == (None, None)
            assert upgraded.success_exit_codes == []
            upgraded.full_clean()  # a stored job is still valid as it is
            assert "limits" not in upgraded.features
            assert upgraded.succeeds_with(0) and not upgraded.succeeds_with(3)
            assert upgraded.output_limit == 2 * 1024 * 1024  # the server's log limit, as before

        # An agent that did not announce limits (0.3.x) still takes it; its
        # assignment carries the bytes its log keeps and no other limit.
        runner = Runner.objects.get(name="web-1")
        [claimed] = claims.claim(runner, "s1", 5, T0)
        assert claimed.state == Execution.RUNNING
        given = claims.assignment(claimed)
        assert given["max_output"] == 2 * 1024 * 1024
        assert not {"on_max_output", "max_memory", "max_cpu_seconds"} & set(given)
        assert "success_exit_codes" not in given
    finally:
        migrate(everything())
