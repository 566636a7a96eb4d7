"""scheduler 0009 (and calendars 0003) upgrade a database holding jobs and
calendars apply wrote: they belong to no file yet, so no file's --prune
deletes them, and the first apply that lists them claims them."""

from io import StringIO

import pytest
import yaml
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from calendars.models import Calendar
from scheduler.models import Job
from tests.migrations import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduler", "0008_triggers"), ("calendars", "0002_calendar_managed_by")]
AFTER = [("scheduler", "0009_job_managed_source")]
LISTING_REPORT = {
    "calendars": [{"name": "ops", "weekdays": ["mon"]}],
    "jobs": [{"name": "report", "schedule": "0 2 * * *", "command": "true", "calendar": "ops"}],
}


def run_apply(tmp_path, filename, document, *args):
    path = tmp_path / filename
    path.write_text(yaml.safe_dump(document))
    call_command("apply", str(path), *args, stdout=StringIO())


def test_rows_apply_wrote_belong_to_no_file_until_one_lists_them(tmp_path):
    old = migrate(BEFORE)
    Calendar_ = old.get_model("calendars", "Calendar")
    Job_ = old.get_model("scheduler", "Job")
    ops = Calendar_.objects.create(name="ops", weekdays=["mon"], managed_by="apply")
    Job_.objects.create(
        name="report", schedule="0 2 * * *", command="true", calendar=ops, managed_by="apply"
    )
    Job_.objects.create(name="by-hand", schedule="0 * * * *", command="true")
    try:
        new = migrate(AFTER)
        jobs = new.get_model("scheduler", "Job").objects.order_by("name")
        assert list(jobs.values_list("name", "managed_by", "managed_source")) == [
            ("by-hand", "admin", ""),
            ("report", "apply", ""),
        ]
        calendar = new.get_model("calendars", "Calendar").objects.get()
        assert (calendar.managed_by, calendar.managed_source) == ("apply", "")

        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
        run_apply(tmp_path, "other.yaml", {}, "--prune")
        assert Job.objects.count() == 2 and Calendar.objects.count() == 1
        run_apply(tmp_path, "croniq.yaml", LISTING_REPORT)
        assert dict(Job.objects.values_list("name", "managed_source")) == {
            "report": "croniq",
            "by-hand": "",
        }
        assert Calendar.objects.get().managed_source == "croniq"
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
