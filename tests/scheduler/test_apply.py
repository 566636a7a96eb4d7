"""`manage.py apply`: jobs and calendars as code, all or nothing, idempotent."""

import datetime as dt
import json
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from calendars.models import Calendar
from scheduler.models import Job

pytestmark = pytest.mark.django_db

DOCUMENT = {
    "calendars": [
        {
            "name": "de-by-workdays",
            "timezone": "Europe/Berlin",
            "weekdays": ["mon", "tue", "wed", "thu", "fri"],
            "holidays": {"country": "DE", "subdivision": "BY"},
            "daily_window": {"start": "06:00", "end": "22:00"},
            "exclude": [{"start": "2026-12-24", "end": "2027-01-06", "label": "Christmas freeze"}],
        }
    ],
    "jobs": [
        {
            "name": "nightly-report",
            "schedule": "30 7 * * *",
            "timezone": "Europe/Berlin",
            "command": "python report.py",
            "env": {"REPORT_DIR": "/srv/reports"},
            "calendar": "de-by-workdays",
            "labels": ["linux"],
            "singleton": True,
            "timeout": 3600,
            "retries": 2,
            "retry_backoff": 30,
            "misfire_policy": "run_once",
        },
        {"name": "heartbeat", "schedule": "@every 5m", "command": "true"},
    ],
}


def write(tmp_path, document, name="croniq.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document) if name.endswith(".yaml") else json.dumps(document))
    return str(path)


def run_apply(*args):
    from io import StringIO

    out, err = StringIO(), StringIO()
    call_command("apply", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def snapshot():
    jobs = list(Job.objects.order_by("name").values())
    calendars = list(Calendar.objects.order_by("name").values())
    return jobs, calendars


def test_apply_creates_calendars_and_jobs_and_schedules_them(tmp_path):
    out, _ = run_apply(write(tmp_path, DOCUMENT))

    assert "+ calendar de-by-workdays" in out
    assert "+ job nightly-report" in out
    job = Job.objects.get(name="nightly-report")
    assert job.calendar.name == "de-by-workdays"
    assert job.env == {"REPORT_DIR": "/srv/reports"}
    assert job.labels == ["linux"]
    assert job.singleton and job.timeout == 3600 and job.retries == 2
    assert job.next_run_at is not None
    assert Calendar.objects.get(name="de-by-workdays").periods.count() == 1
    assert Job.objects.get(name="heartbeat").timezone == "UTC"


def test_a_second_apply_changes_nothing_and_says_so(tmp_path):
    path = write(tmp_path, DOCUMENT)
    run_apply(path)
    before = snapshot()
    events = AuditEvent.objects.count()

    out, _ = run_apply(path)

    assert "nothing to change" in out
    assert snapshot() == before
    assert AuditEvent.objects.count() == events


def test_json_files_work_too(tmp_path):
    run_apply(write(tmp_path, DOCUMENT, "croniq.json"))
    assert Job.objects.count() == 2


def test_a_change_is_applied_and_audited_with_a_diff(tmp_path):
    run_apply(write(tmp_path, DOCUMENT))
    changed = json.loads(json.dumps(DOCUMENT))
    changed["jobs"][1]["schedule"] = "@every 10m"

    out, _ = run_apply(write(tmp_path, changed))

    assert "~ job heartbeat: schedule" in out
    assert Job.objects.get(name="heartbeat").schedule == "@every 10m"
    event = AuditEvent.objects.filter(action="job.changed").get()
    assert event.data["diff"] == {"schedule": ["@every 5m", "@every 10m"]}
    assert event.actor_kind == "user"
    assert event.actor_name.startswith("apply:")


def test_the_first_bad_item_rolls_everything_back_and_names_the_field(tmp_path):
    run_apply(write(tmp_path, DOCUMENT))
    before = snapshot()
    broken = json.loads(json.dumps(DOCUMENT))
    broken["jobs"][0]["command"] = "python other.py"  # a good change before the bad one
    broken["jobs"].append({"name": "bad", "schedule": "61 * * * *", "command": "true"})

    with pytest.raises(CommandError, match="nothing applied"):
        run_apply(write(tmp_path, broken))

    assert snapshot() == before


def test_errors_point_at_the_item_and_field(tmp_path, capsys):
    broken = {
        "jobs": [
            {"name": "ok", "schedule": "@hourly", "command": "true"},
            {"name": "a", "schedule": "61 * * * *", "command": "true"},
            {"name": "b", "schedule": "@hourly", "command": "true", "timezone": "Mars/Base"},
            {"name": "c", "schedule": "@hourly", "command": "true", "calendar": "nope"},
            {"name": "d", "schedul": "@hourly"},
        ]
    }
    from io import StringIO

    err = StringIO()
    with pytest.raises(CommandError):
        call_command("apply", write(tmp_path, broken), stderr=err, stdout=StringIO())
    text = err.getvalue()
    assert "jobs[1].schedule:" in text and "59" in text
    assert "jobs[2].timezone:" in text
    assert "jobs[3].calendar: no calendar named 'nope'" in text
    assert "jobs[4]: unknown field(s): schedul" in text
    assert not Job.objects.exists()


def test_a_job_that_never_meets_its_calendar_is_refused(tmp_path):
    document = {
        "calendars": [{"name": "weekdays", "weekdays": ["mon", "tue", "wed", "thu", "fri"]}],
        "jobs": [
            {"name": "saturday", "schedule": "0 9 * * 6", "command": "true", "calendar": "weekdays"}
        ],
    }
    from io import StringIO

    err = StringIO()
    with pytest.raises(CommandError):
        call_command("apply", write(tmp_path, document), stderr=err, stdout=StringIO())
    assert "jobs[0].schedule:" in err.getvalue()
    assert "never" in err.getvalue()
    assert not Calendar.objects.exists()


def test_a_weekday_range_ending_on_sunday_is_applied_as_cronie_reads_it(tmp_path):
    document = {"jobs": [{"name": "weekly", "schedule": "0 9 * * 5-0", "command": "true"}]}
    run_apply(write(tmp_path, document))
    job = Job.objects.get(name="weekly")
    assert job.schedule == "0 9 * * 5-0"
    after = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)  # a Thursday
    assert [t.strftime("%a") for t in job.upcoming(after, 4)] == ["Fri", "Sat", "Sun", "Fri"]


def test_a_weekday_range_that_runs_backwards_is_refused_naming_the_field(tmp_path):
    document = {"jobs": [{"name": "weekly", "schedule": "0 9 * * fri-mon", "command": "true"}]}
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("apply", write(tmp_path, document), stderr=err, stdout=StringIO())
    assert "jobs[0].schedule: day-of-week field: range fri-mon runs backwards" in err.getvalue()
    assert not Job.objects.exists()


def test_a_business_day_job_is_applied_and_scheduled_on_the_calendars_days(tmp_path):
    document = json.loads(json.dumps(DOCUMENT))
    document["jobs"] = [
        {
            "name": "month-end",
            "schedule": "@business_day -1 18:00",
            "timezone": "Europe/Berlin",
            "command": "true",
            "calendar": "de-by-workdays",
        }
    ]
    from scheduler.apply.document import apply

    apply(document, now=dt.datetime(2029, 5, 1, tzinfo=dt.UTC))
    # Thu 31 May 2029 is Corpus Christi in Bavaria.
    assert Job.objects.get(name="month-end").next_run_at == dt.datetime(
        2029, 5, 30, 16, 0, tzinfo=dt.UTC
    )


@pytest.mark.parametrize(
    ("schedule", "says"),
    [
        ("@business_day 0 09:00", "'@business_day 0 09:00': day number 0 does not exist"),
        ("@business_day 32 09:00", "'@business_day 32 09:00': day number 32 is out of range"),
        ("@business_day 3 25:00", "'@business_day 3 25:00': time '25:00' is not a time of day"),
        ("@business_day 3", "'@business_day 3': the time is missing"),
        # Monday to Friday never gives 24 days.
        ("@business_day 24 09:00", "never fires: schedule '@business_day 24 09:00' has no"),
    ],
)
def test_a_bad_business_day_schedule_is_refused_naming_the_field(tmp_path, schedule, says):
    document = {"jobs": [{"name": "close", "schedule": schedule, "command": "true"}]}
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("apply", write(tmp_path, document), stderr=err, stdout=StringIO())
    assert f"jobs[0].schedule: {says}" in err.getvalue()
    assert not Job.objects.exists()


def test_malformed_files_are_refused_with_a_clear_message(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("jobs: [ {name: x\n")
    with pytest.raises(CommandError):
        run_apply(str(path))
    path.write_text("- just\n- a list\n")
    with pytest.raises(CommandError):
        run_apply(str(path))
    with pytest.raises(CommandError):
        run_apply(str(tmp_path / "missing.yaml"))


def test_bad_periods_are_refused(tmp_path):
    document = {
        "calendars": [
            {"name": "backwards", "exclude": [{"start": "2027-01-06", "end": "2026-12-24"}]}
        ]
    }
    with pytest.raises(CommandError):
        run_apply(write(tmp_path, document))
    assert not Calendar.objects.exists()


def test_dry_run_prints_the_plan_and_changes_nothing(tmp_path):
    out, _ = run_apply(write(tmp_path, DOCUMENT), "--dry-run")

    assert "+ job nightly-report" in out
    assert "would apply 3 change(s)" in out
    assert not Job.objects.exists()
    assert not Calendar.objects.exists()
    assert not AuditEvent.objects.exists()


def test_prune_removes_what_the_file_no_longer_lists(tmp_path):
    run_apply(write(tmp_path, DOCUMENT))
    smaller = {"jobs": [DOCUMENT["jobs"][1]]}

    out, _ = run_apply(write(tmp_path, smaller), "--prune")

    assert "- job nightly-report" in out
    assert "- calendar de-by-workdays" in out
    assert list(Job.objects.values_list("name", flat=True)) == ["heartbeat"]
    assert not Calendar.objects.exists()
    assert AuditEvent.objects.filter(action="job.deleted").count() == 1


def test_without_prune_unlisted_jobs_stay(tmp_path):
    run_apply(write(tmp_path, DOCUMENT))
    run_apply(write(tmp_path, {"jobs": [DOCUMENT["jobs"][1]]}))
    assert Job.objects.count() == 2


def test_datetime_periods_need_an_offset(tmp_path):
    document = {
        "calendars": [
            {"name": "c", "exclude": [{"start": "2026-12-24T10:00", "end": "2026-12-24T12:00"}]}
        ]
    }
    with pytest.raises(CommandError):
        run_apply(write(tmp_path, document))
    document["calendars"][0]["exclude"][0] = {
        "start": "2026-12-24T10:00+01:00",
        "end": "2026-12-24T12:00+01:00",
    }
    run_apply(write(tmp_path, document))
    period = Calendar.objects.get(name="c").periods.get()
    assert period.start_at == dt.datetime(2026, 12, 24, 9, 0, tzinfo=dt.UTC)


def test_a_period_written_with_an_offset_is_applied_once(tmp_path):
    document = {
        "calendars": [
            {
                "name": "c",
                "exclude": [{"start": "2026-04-01T08:00+02:00", "end": "2026-04-01T09:00+02:00"}],
            }
        ]
    }
    path = write(tmp_path, document)
    run_apply(path)
    period_id = Calendar.objects.get(name="c").periods.get().pk

    out, _ = run_apply(path, "--dry-run")
    assert "~ calendar c" not in out
    run_apply(path)
    assert Calendar.objects.get(name="c").periods.get().pk == period_id


def test_a_deferred_saturday_job_on_a_weekday_calendar_is_accepted(tmp_path):
    document = {
        "calendars": [{"name": "weekdays", "weekdays": ["mon", "tue", "wed", "thu", "fri"]}],
        "jobs": [
            {
                "name": "saturday",
                "schedule": "0 9 * * 6",
                "command": "true",
                "calendar": "weekdays",
                "calendar_policy": "defer",
            }
        ],
    }
    run_apply(write(tmp_path, document))
    job = Job.objects.get(name="saturday")
    assert job.next_run_at.weekday() == 0  # runs on the Monday after


T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)  # a Monday


def test_apply_changing_a_description_keeps_what_the_loop_advanced_meanwhile():
    from django.db.models.signals import pre_save

    from scheduler.apply.document import apply
    from scheduler.firing import ticks

    job_item = {"name": "solo", "schedule": "*/5 * * * *", "command": "true", "singleton": True}
    apply({"jobs": [job_item]}, now=T0 - dt.timedelta(minutes=1))
    assert Job.objects.get().next_run_at == T0
    fired = []

    def fire(sender, instance, **kwargs):
        # apply has read the job; the loop fires before apply writes it.
        pre_save.disconnect(fire, sender=Job)
        fired.append(ticks.trigger_due(T0 + dt.timedelta(seconds=1)))

    pre_save.connect(fire, sender=Job, weak=False)
    apply({"jobs": [{**job_item, "description": "edited"}]}, now=T0 + dt.timedelta(seconds=2))

    assert fired == [1]
    job = Job.objects.get()
    assert job.description == "edited"
    assert (job.last_scheduled_at, job.next_run_at) == (T0, T0 + dt.timedelta(minutes=5))
    job.executions.update(state="running", lease=1)
    assert ticks.trigger_due(T0 + dt.timedelta(seconds=3)) == 0  # no second run of T0


def test_a_blackout_added_to_a_base_calendar_reschedules_the_jobs_of_derived_calendars():
    from scheduler.apply.document import apply

    base = {"name": "company"}
    derived = {"name": "team", "base": "company"}
    job = {"name": "sync", "schedule": "0 * * * *", "command": "true", "calendar": "team"}
    apply({"calendars": [base, derived], "jobs": [job]}, now=T0)
    assert Job.objects.get().next_run_at == T0 + dt.timedelta(hours=1)

    freeze = {"start": "2026-06-01T12:30:00Z", "end": "2026-06-01T15:30:00Z"}
    apply({"calendars": [{**base, "exclude": [freeze]}, derived], "jobs": [job]}, now=T0)

    assert Job.objects.get().next_run_at == T0 + dt.timedelta(hours=4)


class Greetings:
    """A section an app above the scheduler might add: `greetings: [text]`,
    each written as a calendar's description; "boom" is refused."""

    def __init__(self, applier):
        self.applier = applier
        self.pruned = False

    def apply(self, sections):
        for index, text in enumerate(sections["greetings"]):
            if text == "boom":
                self.applier.errors.append(f"greetings[{index}]: boom is refused")
                continue
            stored = Calendar.objects.filter(name=f"greeting-{index}").first()
            before = {"text": stored.description} if stored else None
            Calendar.objects.update_or_create(
                name=f"greeting-{index}", defaults={"description": text}
            )
            self.applier.record_change("greeting", str(index), before, {"text": text})

    def prune(self):
        self.applier.record_change("greeting", "old", {"text": "old"}, None)


@pytest.fixture
def greetings(monkeypatch):
    from scheduler.apply import document as applyfile
    from scheduler.apply import sections

    monkeypatch.setattr(sections, "_sections", list(sections._sections))
    applyfile.add_sections(["greetings"], Greetings)


def test_a_section_an_app_adds_is_read_planned_and_pruned(tmp_path, greetings):
    document = {"jobs": [DOCUMENT["jobs"][1]], "greetings": ["hello"]}

    out, _ = run_apply(write(tmp_path, document))

    assert "+ greeting 0" in out and "- greeting old" not in out
    assert Calendar.objects.get(name="greeting-0").description == "hello"
    assert AuditEvent.objects.filter(action="greeting.created").count() == 1
    out, _ = run_apply(write(tmp_path, document), "--prune")
    assert "- greeting old" in out


def test_an_error_in_an_added_section_refuses_the_whole_file(tmp_path, greetings):
    from io import StringIO

    document = {"jobs": [DOCUMENT["jobs"][1]], "greetings": ["hello", "boom"]}
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("apply", write(tmp_path, document), stderr=err, stdout=StringIO())
    assert "greetings[1]: boom is refused" in err.getvalue()
    assert not Job.objects.exists() and not Calendar.objects.exists()


def test_a_section_no_app_added_is_an_unknown_key(tmp_path):
    with pytest.raises(CommandError):
        run_apply(write(tmp_path, {"greetings": ["hello"]}))


def test_a_job_declares_the_parameters_a_trigger_may_set(tmp_path):
    document = {"jobs": [{**DOCUMENT["jobs"][1], "parameters": ["REGION", "DRY_RUN"]}]}
    run_apply(write(tmp_path, document))
    assert Job.objects.get(name="heartbeat").parameters == ["REGION", "DRY_RUN"]
    out, _ = run_apply(write(tmp_path, document))
    assert "nothing to change" in out


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ("REGION", "jobs[0].parameters: a list of environment variable names"),
        (["REGION", "BAD-NAME"], "jobs[0].parameters: 'BAD-NAME' is not an environment"),
        (["CRONIQ_JOB"], "jobs[0].parameters: 'CRONIQ_JOB' is not an environment"),
        (["A", "A"], "jobs[0].parameters: a name appears twice"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(tmp_path, parameters, message):
    document = {"jobs": [{**DOCUMENT["jobs"][1], "parameters": parameters}]}
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("apply", write(tmp_path, document), stderr=err, stdout=err)
    assert message in err.getvalue()
    assert not Job.objects.exists()


def test_a_calendar_changed_by_apply_moves_the_jobs_edit_marker(tmp_path):
    # A resting loop on SQLite learns of job edits from this marker (a MAX
    # over updated_at); the jobs rescheduled for their calendar are edits.
    from scheduler.firing import ticks

    document = {
        "calendars": [{"name": "weekdays", "weekdays": ["mon", "tue", "wed", "thu", "fri"]}],
        "jobs": [
            {"name": "daily", "schedule": "0 9 * * *", "command": "true", "calendar": "weekdays"}
        ],
    }
    run_apply(write(tmp_path, document))
    Job.objects.update(updated_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    before = ticks.last_job_edit()
    document["calendars"][0]["weekdays"] = ["mon"]
    run_apply(write(tmp_path, document))
    assert ticks.last_job_edit() != before
