"""`apply --dry-run` shows what would change: each changed field old -> new
under its summary line, and for a schedule change the next fire times
before and after, counted as the loop counts them (Job.upcoming)."""

import datetime as dt
import json
from io import StringIO

import pytest
import time_machine
import yaml
from django.core.management import call_command

from scheduler.models import Job
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)  # a Tuesday
REPORT = {"name": "report", "schedule": "0 6 * * *", "command": "true"}
WEEKEND = {"name": "weekend", "weekdays": ["sat", "sun"]}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def run_apply(tmp_path, document, *args):
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump(document))
    out = StringIO()
    call_command("apply", str(path), *args, stdout=out)
    return out.getvalue()


def test_the_plan_shows_old_and_new_values_and_the_fire_times_they_move(tmp_path):
    run_apply(tmp_path, {"jobs": [REPORT]})
    moved = {**REPORT, "schedule": "30 7 * * *", "timezone": "Europe/Berlin", "retries": 2}

    out = run_apply(tmp_path, {"jobs": [moved]}, "--dry-run")

    assert out.splitlines() == [
        "~ job report: retries, schedule, timezone",
        "    retries: 0 -> 2",
        '    schedule: "0 6 * * *" -> "30 7 * * *"',
        '    timezone: "UTC" -> "Europe/Berlin"',
        "    next fires before: 2026-12-02 06:00 UTC, 2026-12-03 06:00 UTC, 2026-12-04 06:00 UTC, "
        "2026-12-05 06:00 UTC, 2026-12-06 06:00 UTC",
        "    next fires after: 2026-12-02 06:30 UTC, 2026-12-03 06:30 UTC, 2026-12-04 06:30 UTC, "
        "2026-12-05 06:30 UTC, 2026-12-06 06:30 UTC",
        "would apply 1 change(s)",
    ]
    assert Job.objects.get().schedule == "0 6 * * *"


def test_a_new_calendar_shows_where_the_fires_go(tmp_path):
    run_apply(tmp_path, {"calendars": [WEEKEND], "jobs": [REPORT]})

    out = run_apply(
        tmp_path, {"calendars": [WEEKEND], "jobs": [{**REPORT, "calendar": "weekend"}]}, "--dry-run"
    )

    assert '    calendar: null -> "weekend"' in out
    assert (
        "    next fires after: 2026-12-05 06:00 UTC, 2026-12-06 06:00 UTC, 2026-12-12 06:00 UTC, "
        "2026-12-13 06:00 UTC, 2026-12-19 06:00 UTC"
    ) in out


def test_a_change_that_moves_no_fire_time_shows_none(tmp_path):
    run_apply(tmp_path, {"jobs": [REPORT]})

    out = run_apply(tmp_path, {"jobs": [{**REPORT, "env": {"A": "1"}}]}, "--dry-run")

    assert out.splitlines() == [
        "~ job report: env",
        '    env: {} -> {"A": "1"}',
        "would apply 1 change(s)",
    ]


def test_a_stored_schedule_that_cannot_be_read_shows_unknown_fire_times(tmp_path):
    JobFactory(name="report", schedule="61 * * * *", command="true", managed_by="apply")

    out = run_apply(tmp_path, {"jobs": [REPORT]}, "--dry-run")

    assert "    next fires before: unknown" in out
    assert "    next fires after: 2026-12-02 06:00 UTC" in out


def test_json_carries_the_fire_times_as_well(tmp_path):
    run_apply(tmp_path, {"jobs": [REPORT]})

    out = run_apply(
        tmp_path, {"jobs": [{**REPORT, "schedule": "0 7 * * *"}]}, "--dry-run", "--json"
    )

    [change] = json.loads(out)
    assert change["diff"] == {"schedule": ["0 6 * * *", "0 7 * * *"]}
    assert change["fires"]["before"][0] == "2026-12-02 06:00:00+00:00"
    assert change["fires"]["after"][0] == "2026-12-02 07:00:00+00:00"


def test_the_plan_never_prints_a_secret_env_value(tmp_path):
    run_apply(tmp_path, {"jobs": [{**REPORT, "env": {"API_TOKEN": "old-s3cret", "A": "1"}}]})

    changed = {**REPORT, "env": {"API_TOKEN": "new-s3cret", "A": "2"}}
    out = run_apply(tmp_path, {"jobs": [changed]}, "--dry-run")

    assert (
        '    env: {"A": "1", "API_TOKEN": "********"} -> {"A": "2", "API_TOKEN": "********"}' in out
    )
    assert "s3cret" not in out


def test_fire_times_are_counted_only_for_jobs_whose_fires_move(tmp_path, monkeypatch):
    run_apply(tmp_path, {"jobs": [REPORT]})

    def not_counted(job, after, count):
        raise AssertionError(f"counted the fire times of {job.name}")

    monkeypatch.setattr(Job, "upcoming", not_counted)
    out = run_apply(tmp_path, {"jobs": [{**REPORT, "command": "false"}]}, "--dry-run")

    assert out.splitlines()[:2] == ["~ job report: command", '    command: "true" -> "false"']
