"""One answer to "when does this job fire next": `Job.upcoming`, shown by the
admin, the dashboard and `next_runs`, is what the loop then fires."""

import json
import re
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.urls import reverse

from scheduler.firing import ticks
from scheduler.firing.loop import SchedulerLoop
from scheduler.models import Execution, Job
from tests.admin_forms import job_form
from tests.factories import CalendarFactory, CalendarPeriodFactory

pytestmark = pytest.mark.django_db

CREATED = datetime(2026, 11, 30, 11, 40, 33, tzinfo=UTC)  # a Monday, a non-round second
TEN_MINUTES = timedelta(minutes=10)
STEP = timedelta(seconds=13)  # the loop's ticks in these tests


def at(hour, minute, second=0):
    return datetime(2026, 11, 30, hour, minute, second, tzinfo=UTC)


def job(schedule="@every 10m", **fields):
    return Job(name="poll", schedule=schedule, command="true", **fields)


# --- the function ------------------------------------------------------------


def test_an_every_job_fires_first_at_its_next_run_and_keeps_its_grid():
    poll = job(next_run_at=at(11, 50, 33), last_scheduled_at=at(11, 40, 33))
    assert poll.upcoming(at(11, 41, 32), 3) == [at(11, 50, 33), at(12, 0, 33), at(12, 10, 33)]


def test_an_every_job_never_lists_instants_before_after():
    # The loop stopped 50 minutes ago: next_run_at is long past. The preview
    # continues its grid from now, it does not replay the missed instants.
    poll = job(next_run_at=at(11, 10, 33), last_scheduled_at=at(11, 0, 33))
    assert poll.upcoming(at(12, 0, 0), 2) == [at(12, 0, 33), at(12, 10, 33)]
    assert poll.upcoming(at(12, 0, 33), 1) == [at(12, 10, 33)]  # strictly after


def test_an_every_job_follows_its_grid_back_before_its_next_run():
    poll = job(next_run_at=at(11, 50, 33))
    assert poll.upcoming(at(11, 0, 0), 2) == [at(11, 0, 33), at(11, 10, 33)]


def test_an_every_job_without_next_run_counts_from_after_as_a_resume_would():
    paused = job(next_run_at=None, last_scheduled_at=at(9, 0, 33), paused_at=at(9, 1))
    assert paused.upcoming(at(12, 0, 7), 2) == [at(12, 10, 7), at(12, 20, 7)]


def test_cron_instants_do_not_depend_on_the_anchor():
    nightly = job("30 2 * * *", timezone="Europe/Berlin", next_run_at=at(1, 30))
    expected = [datetime(2026, 12, 1, 1, 30, tzinfo=UTC), datetime(2026, 12, 2, 1, 30, tzinfo=UTC)]
    assert nightly.upcoming(at(12, 0), 2) == expected


@pytest.mark.parametrize("policy", [Job.SKIP, Job.DEFER])
@pytest.mark.parametrize("schedule", ["@every 7m", "*/20 * * * *"])
def test_upcoming_is_what_the_loop_fires_around_a_calendar_block(schedule, policy):
    calendar = CalendarFactory()
    CalendarPeriodFactory(
        calendar=calendar,
        start_date=None,
        end_date=None,
        start_at=at(12, 3),
        end_at=at(12, 44, 30),
    )
    poll = Job.objects.create(
        name="poll", schedule=schedule, command="true", calendar=calendar, calendar_policy=policy
    )
    poll.reschedule(CREATED)
    poll.save()
    now = CREATED + timedelta(seconds=1)
    preview = poll.upcoming(now, 6)

    fired = fire_until(preview[-1], step=timedelta(seconds=47), start=now)
    assert fired == preview
    assert all(instant > now for instant in preview)


def fire_until(last, step, start):
    """Tick the loop every `step` from `start` until `last` and return what it fired."""
    now = start
    while now <= last:
        now += step
        ticks.trigger_due(now)
    return list(Execution.objects.order_by("scheduled_for").values_list("scheduled_for", flat=True))


# --- the same instants everywhere ---------------------------------------------


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client


def create_in_admin(staff, **fields):
    form = job_form(name="poll", command="true", schedule="@every 10m", timezone="UTC", **fields)
    answer = staff.post(reverse("admin:scheduler_job_add"), form)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    return Job.objects.get(name=form["name"])


def time_elements(html):
    return [datetime.fromisoformat(t) for t in re.findall(r'<time datetime="([^"]+)"', html)]


def admin_preview(staff, poll):
    page = staff.get(reverse("admin:scheduler_job_change", args=[poll.pk])).content.decode()
    fires = re.search(r'<div class="readonly"><ol>(.*?)</ol>', page, re.S).group(1)
    next_run = re.search(r'field-next_run">.*?<div class="readonly">(.*?)</div>', page, re.S)
    return time_elements(next_run.group(1)), time_elements(fires)


def dashboard_preview(staff, poll):
    page = staff.get(reverse("dashboard:job", args=[poll.name])).content.decode()
    fires = re.search(r"<ol class=\"fires\" data-next-fires>(.*?)</ol>", page, re.S).group(1)
    overview = staff.get(reverse("dashboard:overview")).content.decode()
    row = overview.split(f'data-job="{poll.name}"')[1].split("</tr>")[0]
    return time_elements(row), time_elements(fires)


def next_runs_preview(poll, count):
    out = StringIO()
    call_command("next_runs", poll.name, "--count", str(count), "--json", stdout=out)
    return [datetime.fromisoformat(t) for t in json.loads(out.getvalue())]


def test_admin_dashboard_next_runs_and_the_loop_agree_on_an_every_job(staff):
    with time_machine.travel(CREATED, tick=False):
        poll = create_in_admin(staff)
    expected = [CREATED + n * TEN_MINUTES for n in range(1, 11)]

    for viewed in (at(11, 41, 32), at(11, 41, 41)):  # a page, then next_runs, a bit later
        with time_machine.travel(viewed, tick=False):
            assert next_runs_preview(poll, 10) == expected
            assert dashboard_preview(staff, poll) == ([expected[0]], expected)
            assert admin_preview(staff, poll) == ([expected[0]], expected)

    # The loop ticks every 13 s and fires the first two instants.
    assert fire_until(expected[1], step=STEP, start=at(11, 41, 41)) == expected[:2]

    after_two = expected[2:] + [expected[-1] + k * TEN_MINUTES for k in (1, 2)]
    with time_machine.travel(at(12, 4, 29), tick=False):
        assert next_runs_preview(poll, 10) == after_two
        assert dashboard_preview(staff, poll) == ([after_two[0]], after_two)
        assert admin_preview(staff, poll) == ([after_two[0]], after_two)

    assert fire_until(expected[3], step=STEP, start=at(12, 4, 29)) == expected[:4]


def form_preview(staff, **fields):
    """The job form's live preview (scheduler.jobs.previews) as the script asks it."""
    query = {"schedule": "@every 10m", "timezone": "UTC", **fields}
    answer = staff.get(reverse("admin:scheduler_job_preview"), query)
    assert answer.status_code == 200, answer.content.decode()
    return [datetime.fromisoformat(e["at"]) for e in answer.json()["entries"]]


# The loop's real tick closes stale connections: it needs real transactions.
@pytest.mark.django_db(transaction=True)
def test_every_preview_is_the_instant_the_loop_fires_to_the_second(staff):
    first = CREATED + TEN_MINUTES  # 11:50:33
    expected = [CREATED + n * TEN_MINUTES for n in range(1, 11)]
    with time_machine.travel(CREATED, tick=False):
        typed = form_preview(staff)  # the add form, before the save
        poll = create_in_admin(staff)
    assert typed == expected

    with time_machine.travel(at(11, 45, 2), tick=False):
        assert form_preview(staff, job=poll.pk) == expected
        assert admin_preview(staff, poll) == ([first], expected)
        assert dashboard_preview(staff, poll) == ([first], expected)
        assert next_runs_preview(poll, 10) == expected

    # A tick a second early fires nothing; the tick at the instant fires it.
    assert SchedulerLoop(clock=lambda: first - timedelta(seconds=1)).run_once() == {}
    assert SchedulerLoop(clock=lambda: first).run_once() == {"fired": 1}
    fired = Execution.objects.get(job=poll)
    assert fired.scheduled_for == first
    poll.refresh_from_db()
    assert poll.next_run_at == expected[1]
    with time_machine.travel(first, tick=False):
        assert form_preview(staff, job=poll.pk) == expected[1:] + [expected[-1] + TEN_MINUTES]


def test_after_an_outage_too_long_to_list_an_every_job_stays_on_its_grid():
    # 1,440 missed instants: more than the loop lists one by one, so it jumps
    # to the misfire grace window. The jump must land on the job's grid, where
    # the preview shown during the outage said the job fires.
    poll = Job.objects.create(
        name="poll", schedule="@every 10s", command="true", next_run_at=CREATED
    )
    now = CREATED + timedelta(hours=4, seconds=4)
    preview = poll.upcoming(now, 3)

    ticks.trigger_due(now)

    poll.refresh_from_db()
    assert poll.next_run_at == preview[0]
    fired = Execution.objects.values_list("scheduled_for", flat=True)
    assert fired and all((t - CREATED) % timedelta(seconds=10) == timedelta(0) for t in fired)
