"""scheduler 0024 on a database holding jobs of both earlier kinds: each
keeps its kind and gets no container (`container` {}), still valid and
claimed by runners whose agents announce no container engine, its
assignment as it was."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from dispatch import claims
from runners.models import Runner
from scheduler.models import Execution, Job
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0023_job_kind_http"), ("runners", "0004_runner_features")]
AFTER = [("scheduler", "0024_job_container")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
REQUEST = {
    "method": "GET", "url": "https://hooks.example.com/x", "headers": {}, "body": "",
    "expect_status": [], "timeout": None,
}  # fmt: skip


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_stored_jobs_keep_their_kind_get_no_container_and_keep_running():
    old = migrate(BEFORE)
    jobs = old.get_model("scheduler", "Job").objects
    shell = jobs.create(
        name="report", schedule="*/5 * * * *", command="python report.py", labels=["linux"],
        env={"A": "1"},
    )  # fmt: skip
    jobs.create(name="ping", schedule="@hourly", kind="http", http=REQUEST, labels=["linux"])
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
        report, ping = Job.objects.get(name="report"), Job.objects.get(name="ping")
        assert (report.kind, report.container, report.command) == (
            "shell",
            {},
            "python report.py",
        )
        assert (ping.kind, ping.container, ping.http) == ("http", {}, REQUEST)
        for job in (report, ping):
            job.full_clean()  # a stored job is still valid as it is
        assert (report.features, ping.features) == (frozenset(), {"http"})

        # An agent without a container engine (or older) still takes it,
        # and its assignment is as it was: no kind, no container.
        runner = Runner.objects.get(name="web-1")
        [claimed] = claims.claim(runner, "s1", 5, T0)
        assert claimed.state == Execution.RUNNING
        given = claims.assignment(claimed)
        assert "kind" not in given and "container" not in given
        assert given["command"] == "python report.py"
    finally:
        migrate(everything())
