"""jitter: a fixed per-job delay of every instant, from a hash of the job's
name: the same in every process and after a restart, shown wherever the
job's fire times are (next_runs, the preview, apply's plan, the loop)."""

import datetime as dt
import subprocess
import sys
from collections import Counter

import pytest
from django.core.management import call_command

from calendars.models import Calendar
from scheduler.apply import document as applyfile
from scheduler.apply.document import ApplyError
from scheduler.firing import ticks
from scheduler.models import Execution, Job, jitter_offset
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 0, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def test_every_instant_moves_by_the_same_offset_below_the_jitter():
    plain = JobFactory(name="report", schedule="0 * * * *", next_run_at=None)
    spread = JobFactory(name="report-2", schedule="0 * * * *", jitter=600, next_run_at=None)
    offset = spread.offset
    assert dt.timedelta(0) <= offset < dt.timedelta(seconds=600)
    # 00:00 + offset is after T0 (00:00): the schedule's own 00:00 counts.
    before = T0 - dt.timedelta(microseconds=1)
    assert spread.upcoming(T0, 3) == [t + offset for t in plain.upcoming(before, 3)]
    # Counted from an instant of its own, the next one is an hour on.
    first = spread.next_fire_after(T0)
    assert spread.next_fire_after(first) == first + HOUR


def test_the_offset_is_the_same_in_another_process():
    code = (
        "from scheduler.models import jitter_offset;"
        "print(jitter_offset('nightly-import', 1800).total_seconds())"
    )
    env = {"DJANGO_SETTINGS_MODULE": "croniq_project.settings", "SECRET_KEY": "x"}
    import os

    other = subprocess.run(
        [sys.executable, "-c", "import django; django.setup();" + code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env, "PYTHONHASHSEED": "12345"},
    )
    assert float(other.stdout) == jitter_offset("nightly-import", 1800).total_seconds()


def test_jobs_due_together_spread_over_the_jitter():
    offsets = [jitter_offset(f"job-{n}", 3600) for n in range(300)]
    minutes = Counter(int(o.total_seconds() // 60) for o in offsets)
    assert len(minutes) > 50 and max(minutes.values()) <= 3 * 300 / 60


def test_the_loop_fires_at_the_jittered_instant_not_before():
    job = JobFactory(name="spread", schedule="0 * * * *", jitter=900, next_run_at=None)
    job.reschedule(T0)
    job.save()
    due = job.next_run_at
    assert due == T0 + job.offset  # the schedule's 00:00, moved past T0
    ticks.trigger_due(due - dt.timedelta(seconds=1))
    assert not Execution.objects.exists()
    ticks.trigger_due(due)
    assert Execution.objects.get().scheduled_for == due


def test_the_calendar_judges_the_schedules_instant():
    weekdays = Calendar.objects.create(
        name="weekdays", weekdays=["mon", "tue", "wed", "thu", "fri"]
    )
    job = JobFactory(
        name="weekday-report",
        schedule="0 23 * * *",
        jitter=7200,
        calendar=weekdays,
        next_run_at=None,
    )
    # Friday 2026-06-05 23:00 is allowed, even if its offset carries it into Saturday.
    fires = job.upcoming(dt.datetime(2026, 6, 5, 12, 0, tzinfo=dt.UTC), 2)
    assert fires[0] == dt.datetime(2026, 6, 5, 23, 0, tzinfo=dt.UTC) + job.offset
    assert fires[1] == dt.datetime(2026, 6, 8, 23, 0, tzinfo=dt.UTC) + job.offset


def test_next_runs_shows_the_jittered_instants(capsys):
    job = JobFactory(name="spread", schedule="0 * * * *", jitter=900, next_run_at=None)
    call_command("next_runs", "spread", "--after", T0.isoformat(), "--count", "2", "--json")
    shown = capsys.readouterr().out
    assert (T0 + HOUR + job.offset).isoformat() in shown


def test_apply_takes_a_duration_and_its_plan_shows_five_fires_moved():
    job = {"name": "spread", "schedule": "0 * * * *", "command": "true"}
    applyfile.apply({"jobs": [job]}, now=T0)
    [change] = applyfile.apply({"jobs": [{**job, "jitter": "10m"}]}, now=T0)
    assert Job.objects.get().jitter == 600
    offset = jitter_offset("spread", 600)
    before = change.fires["before"]  # 01:00 to 05:00
    assert len(before) == 5
    # Planned at 00:00: the schedule's 00:00 plus the offset is still ahead.
    assert change.fires["after"] == [T0 + offset] + [t + offset for t in before[:4]]


@pytest.mark.parametrize(
    "value, error",
    [
        (0, "jobs[0].jitter: must be at least 1"),
        ("2d", "jobs[0].jitter"),
        ("soon", "jobs[0].jitter"),
    ],
)
def test_a_bad_jitter_is_refused_naming_the_field(value, error):
    item = {"name": "spread", "schedule": "0 * * * *", "command": "true", "jitter": value}
    with pytest.raises(ApplyError) as refused:
        applyfile.apply({"jobs": [item]}, now=T0)
    assert any(e.startswith(error) for e in refused.value.errors), refused.value.errors
    assert not Job.objects.exists()
