"""scheduler 0023 on a database holding jobs: each becomes a shell job with
no request (`kind` shell, `http` {}), still valid and claimed by runners
whose agents predate http jobs, as before."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from dispatch import claims
from runners.models import Runner
from scheduler.models import Execution, Job
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0022_job_webhook"), ("runners", "0004_runner_features")]
AFTER = [("scheduler", "0023_job_kind_http")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_stored_jobs_become_shell_jobs_without_a_request_and_keep_running():
    old = migrate(BEFORE)
    job = old.get_model("scheduler", "Job").objects.create(
        name="report", schedule="*/5 * * * *", command="python report.py", labels=["linux"],
        env={"A": "1"}, stdin="in\n",
    )  # fmt: skip
    old.get_model("scheduler", "Execution").objects.create(
        job=job, scheduled_for=T0, attempt=1, run_after=T0, created_at=T0, state="pending",
        trigger="manual",
    )  # fmt: skip
    old.get_model("runners", "Runner").objects.create(
        name="web-1", labels=["linux"], session="s1", registered_at=T0, last_seen_at=T0,
        features=["stdin", "run_as"],
    )  # fmt: skip
    try:
        migrate(AFTER)
        migrate(everything())
        upgraded = Job.objects.get(name="report")
        assert (upgraded.kind, upgraded.http) == ("shell", {})
        assert (upgraded.command, upgraded.env, upgraded.stdin) == (
            "python report.py",
            {"A": "1"},
            "in\n",
        )
        upgraded.full_clean()  # a stored job is still valid as it is
        assert upgraded.features == {"stdin"}

        # An agent that announced stdin but not http (0.3.x) still takes it,
        # and its assignment is as it was: no kind, no request.
        runner = Runner.objects.get(name="web-1")
        [claimed] = claims.claim(runner, "s1", 5, T0)
        assert claimed.state == Execution.RUNNING
        given = claims.assignment(claimed)
        assert "kind" not in given and "http" not in given
        assert given["command"] == "python report.py"
    finally:
        migrate(everything())
