"""scheduler 0025 on a database holding jobs: each gets no tags (`[]`) and
is otherwise as it was; a tag can then be given to it and found by."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from scheduler.jobs import tags
from scheduler.models import Job
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0024_job_container")]
AFTER = [("scheduler", "0025_job_tags")]


def everything():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_stored_jobs_get_no_tags_and_keep_everything_else():
    old = migrate(BEFORE)
    old.get_model("scheduler", "Job").objects.create(
        name="report", schedule="*/5 * * * *", command="python report.py", labels=["linux"],
        owner="team-data",
    )  # fmt: skip
    try:
        migrate(AFTER)
        migrate(everything())
        upgraded = Job.objects.get(name="report")
        assert upgraded.tags == []
        assert (upgraded.labels, upgraded.owner) == (["linux"], "team-data")
        upgraded.full_clean()  # still valid as it is
        Job.objects.filter(pk=upgraded.pk).update(tags=["billing"])
        assert list(tags.carrying(Job.objects.all(), "billing")) == [upgraded]
    finally:
        migrate(everything())
