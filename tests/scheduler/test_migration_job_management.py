"""0007 (and calendars 0002) upgrade a database that holds jobs, paused
ones and calendars: each is managed by the admin, pauses have no end."""

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0006_job_health_and_owner"), ("calendars", "0001_initial")]
AFTER = [("scheduler", "0007_job_management")]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def test_existing_jobs_and_calendars_are_the_admins_and_paused_jobs_stay_paused():
    old = migrate(BEFORE)
    Calendar = old.get_model("calendars", "Calendar")
    Job = old.get_model("scheduler", "Job")
    ops = Calendar.objects.create(name="ops", weekdays=["mon"])
    Job.objects.create(name="report", schedule="0 2 * * *", command="true", calendar=ops)
    Job.objects.create(name="held", schedule="0 * * * *", command="true", paused_at=T0)
    try:
        new = migrate(AFTER)
        jobs = new.get_model("scheduler", "Job").objects.order_by("name")
        assert list(jobs.values_list("name", "managed_by", "paused_at", "paused_until",
                                     "pause_reason")) == [
            ("held", "admin", T0, None, ""),
            ("report", "admin", None, None, ""),
        ]  # fmt: skip
        calendar = new.get_model("calendars", "Calendar").objects.get()
        assert calendar.managed_by == "admin"
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
