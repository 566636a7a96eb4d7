"""scheduler 0019 and runners 0004 on a database holding rows: jobs get an
empty `stdin` and `run_as` and do not run on register; runners registered
before announced no features, so they get no job needing one until their
agent registers again."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from dispatch import claims
from runners.models import Runner
from scheduler.models import Execution, Job
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0018_job_retry_bounds"), ("runners", "0003_runner_drained")]
AFTER = [
    ("scheduler", "0019_job_stdin_run_as_run_on_register"),
    ("runners", "0004_runner_features"),
]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_stored_jobs_and_runners_upgrade_to_the_defaults_and_keep_working():
    old = migrate(BEFORE)
    job = old.get_model("scheduler", "Job").objects.create(
        name="report", schedule="*/5 * * * *", command="true", labels=["linux"]
    )
    old.get_model("scheduler", "Execution").objects.create(
        job=job, scheduled_for=T0, attempt=1, run_after=T0, created_at=T0, state="pending",
        trigger="manual",
    )  # fmt: skip
    old.get_model("runners", "Runner").objects.create(
        name="web-1", labels=["linux"], session="s1", registered_at=T0, last_seen_at=T0
    )
    try:
        migrate(AFTER)
        migrate(everything())
        upgraded = Job.objects.get(name="report")
        assert (upgraded.stdin, upgraded.run_as, upgraded.run_on_register) == ("", "", False)
        upgraded.full_clean()  # a stored job is still valid as it is
        runner = Runner.objects.get(name="web-1")
        assert runner.features == []

        # Its plain work is claimed as before; a job needing a feature waits
        # until the runner's agent announces it.
        Job.objects.filter(pk=upgraded.pk).update(run_as="nobody")
        assert claims.claim(runner, "s1", 5, T0) == []
        Job.objects.filter(pk=upgraded.pk).update(run_as="")
        [claimed] = claims.claim(runner, "s1", 5, T0)
        assert claimed.state == Execution.RUNNING
    finally:
        migrate(everything())
