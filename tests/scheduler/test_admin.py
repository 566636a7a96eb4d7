"""Job and execution admin: validation, actions, audit."""

import datetime as dt
import re

import pytest
import time_machine
from django.urls import reverse

from audit.models import AuditEvent
from scheduler.models import Execution, Job
from tests.admin_forms import job_form
from tests.factories import CalendarFactory, ExecutionFactory, JobFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client, django_user_model):
    user = django_user_model.objects.create_superuser("ops", "ops@example.com", "pw")
    client.force_login(user)
    return client


def test_adding_a_job_schedules_it_and_audits_it(staff):
    answer = staff.post(reverse("admin:scheduler_job_add"), job_form())
    assert answer.status_code == 302, answer.content.decode()[:2000]
    job = Job.objects.get(name="report")
    assert job.next_run_at is not None
    event = AuditEvent.objects.get(action="job.created")
    assert event.actor_name == "ops"
    assert event.data["schedule"] == [None, "30 2 * * *"]


def test_a_broken_cron_is_refused_with_a_readable_message(staff):
    answer = staff.post(reverse("admin:scheduler_job_add"), job_form(schedule="61 * * * *"))
    assert answer.status_code == 200
    assert "59" in answer.content.decode()
    assert not Job.objects.exists()


def test_an_unknown_timezone_is_refused(staff):
    answer = staff.post(reverse("admin:scheduler_job_add"), job_form(timezone="Mars/Olympus"))
    assert answer.status_code == 200
    assert "Mars/Olympus" in answer.content.decode()
    assert not Job.objects.exists()


def test_a_job_that_never_meets_its_calendar_is_refused(staff):
    weekdays = CalendarFactory(weekdays=["mon", "tue", "wed", "thu", "fri"])
    form = job_form(schedule="0 9 * * 6", calendar=str(weekdays.pk))
    answer = staff.post(reverse("admin:scheduler_job_add"), form)
    assert answer.status_code == 200
    assert "never" in answer.content.decode()
    assert not Job.objects.exists()


def test_changing_a_schedule_moves_the_next_run_and_records_a_diff(staff):
    staff.post(reverse("admin:scheduler_job_add"), job_form())
    job = Job.objects.get()
    before = job.next_run_at
    url = reverse("admin:scheduler_job_change", args=[job.pk])
    answer = staff.post(url, job_form(schedule="45 3 * * *"))
    assert answer.status_code == 302
    job.refresh_from_db()
    assert job.next_run_at != before
    assert job.next_run_at.astimezone(dt.UTC).minute == 45
    event = AuditEvent.objects.get(action="job.changed")
    assert event.data["schedule"] == ["30 2 * * *", "45 3 * * *"]


def test_run_now_action_creates_a_manual_execution(staff):
    job = JobFactory()
    answer = staff.post(
        reverse("admin:scheduler_job_changelist"),
        {"action": "run_now", "_selected_action": [job.pk]},
    )
    assert answer.status_code == 302
    assert job.executions.get().trigger == Execution.MANUAL
    assert AuditEvent.objects.filter(action="job.run_now", actor_name="ops").exists()


def test_pages_render_with_next_fires_and_logs(staff):
    job = JobFactory(schedule="0 9 * * 1-5")
    execution = ExecutionFactory(job=job, state=Execution.SUCCEEDED)
    execution.log_chunks.create(seq=1, data="hello <world>\n")

    page = staff.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert page.count("<li>") >= 10  # the next 10 fire times
    assert (
        "At 09:00 AM, Monday through Friday"
        in staff.get(reverse("admin:scheduler_job_changelist")).content.decode()
    )

    detail = staff.get(reverse("admin:scheduler_execution_change", args=[execution.pk]))
    assert "hello &lt;world&gt;" in detail.content.decode()
    assert staff.get(reverse("admin:scheduler_execution_changelist")).status_code == 200


def test_cancel_and_retry_actions(staff):
    running = ExecutionFactory(state=Execution.RUNNING, lease=1)
    failed = ExecutionFactory(state=Execution.FAILED)
    url = reverse("admin:scheduler_execution_changelist")
    staff.post(url, {"action": "cancel", "_selected_action": [running.pk]})
    staff.post(url, {"action": "retry", "_selected_action": [failed.pk]})
    running.refresh_from_db()
    assert running.cancel_requested_at is not None
    assert failed.job.executions.filter(attempt=2, trigger=Execution.RETRY).exists()


def test_the_admin_needs_a_login(client):
    answer = client.get(reverse("admin:scheduler_job_changelist"))
    assert answer.status_code == 302
    assert "/admin/login/" in answer["Location"]


def test_the_job_list_costs_a_bounded_number_of_queries(staff, django_assert_max_num_queries):
    for _ in range(30):
        job = JobFactory()
        ExecutionFactory(job=job, state=Execution.FAILED)
    with django_assert_max_num_queries(12):
        page = staff.get(reverse("admin:scheduler_job_changelist"))
    assert page.content.decode().count("failed") >= 30


def visible_text(html):
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


def test_fire_times_read_on_the_jobs_clock_with_utc_beside(staff):
    # Thursday 26 March 2026, 13:00 in Berlin; summer time starts on Sunday the 29th.
    now = dt.datetime(2026, 3, 26, 12, 0, tzinfo=dt.UTC)
    job = JobFactory(schedule="0 9 * * 1-5", timezone="Europe/Berlin")
    job.reschedule(now)
    job.save()

    with time_machine.travel(now, tick=False):
        page = staff.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
        listing = staff.get(reverse("admin:scheduler_job_changelist")).content.decode()

    fires = re.search(r'field-next_fires">.*?<ol>(.*?)</ol>', page, re.S).group(1)
    assert [visible_text(li) for li in re.findall(r"<li>(.*?)</li>", fires)[:3]] == [
        "2026-03-27 09:00:00 CET (08:00:00 UTC)",
        "2026-03-30 09:00:00 CEST (07:00:00 UTC)",
        "2026-03-31 09:00:00 CEST (07:00:00 UTC)",
    ]
    next_run = re.search(r'field-next_run">.*?<div class="readonly">(.*?)</div>', page, re.S)
    assert visible_text(next_run.group(1)) == "2026-03-27 09:00:00 CET (08:00:00 UTC)"
    row = re.search(r'<td class="field-next_run">(.*?)</td>', listing, re.S).group(1)
    assert visible_text(row) == "2026-03-27 09:00:00 CET (08:00:00 UTC)"


def test_a_broken_schedule_typed_into_the_change_form_is_refused_not_a_500(staff):
    job = JobFactory(name="report", schedule="30 2 * * *", timezone="Europe/Berlin")
    answer = staff.post(
        reverse("admin:scheduler_job_change", args=[job.pk]), job_form(schedule="61 * * * *")
    )
    assert answer.status_code == 200
    assert "59" in answer.content.decode()
    job.refresh_from_db()
    assert job.schedule == "30 2 * * *"


T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def fire_once_before_the_next_job_save(now):
    """Run the real firing tick once, between the admin reading the job and
    writing it back: the interleaving of an operator and the loop."""
    from django.db.models.signals import pre_save

    from scheduler.firing import ticks

    fired = []

    def fire(sender, instance, **kwargs):
        pre_save.disconnect(fire, sender=Job)
        fired.append(ticks.trigger_due(now))

    pre_save.connect(fire, sender=Job, weak=False)
    return fired


def edit_form(job, **overrides):
    return job_form(
        name=job.name,
        command=job.command,
        schedule=job.schedule,
        timezone=job.timezone,
        **{"overlap": job.overlap, **overrides},
    )


@pytest.mark.parametrize("singleton", [False, True])
def test_an_operator_saving_a_description_keeps_what_the_loop_advanced(staff, singleton):
    job = JobFactory(schedule="*/5 * * * *", next_run_at=T0, singleton=singleton)
    fired = fire_once_before_the_next_job_save(T0 + dt.timedelta(seconds=1))

    url = reverse("admin:scheduler_job_change", args=[job.pk])
    answer = staff.post(url, edit_form(job, description="nightly numbers"))

    assert answer.status_code == 302, answer.content.decode()[:2000]
    assert fired == [1]
    job.refresh_from_db()
    assert job.description == "nightly numbers"
    assert job.next_run_at == T0 + dt.timedelta(minutes=5)
    assert job.last_scheduled_at == T0
    event = AuditEvent.objects.get(action="job.changed")
    assert set(event.data) == {"description"}
    # The instant is not fired twice; a singleton does not stop the loop.
    from scheduler.firing import ticks

    Execution.objects.filter(job=job).update(state=Execution.RUNNING, lease=1)
    assert ticks.trigger_due(T0 + dt.timedelta(seconds=2)) == 0
    assert job.executions.count() == 1


def test_saving_a_quarantined_job_clears_its_error_and_schedules_it_again(staff):
    job = JobFactory(schedule="*/5 * * * *", next_run_at=None, error="IntegrityError: ...")
    url = reverse("admin:scheduler_job_change", args=[job.pk])

    page = staff.get(url).content.decode()
    assert "IntegrityError: ..." in page

    answer = staff.post(url, edit_form(job))
    assert answer.status_code == 302
    job.refresh_from_db()
    assert job.error == ""
    assert job.error_at is None
    assert job.next_run_at is not None


def test_the_job_list_shows_which_jobs_are_in_error(staff):
    JobFactory(name="healthy")
    JobFactory(name="stuck", error="IntegrityError: ...", next_run_at=None)
    page = staff.get(reverse("admin:scheduler_job_changelist") + "?o=1").content.decode()
    rows = [row for row in page.split("<tr") if "field-name" in row]
    icons = {("stuck" in row): ("icon-yes" in row.split("field-has_error")[1]) for row in rows}
    assert icons == {True: True, False: False}


def test_every_time_in_the_job_and_execution_admin_carries_its_timezone(staff):
    instant = dt.datetime(2026, 11, 30, 11, 40, 33, tzinfo=dt.UTC)
    job = JobFactory(timezone="Europe/Berlin", last_scheduled_at=instant, paused_at=instant)
    execution = ExecutionFactory(job=job, scheduled_for=instant, claimed_at=instant)

    pages = [
        reverse("admin:scheduler_job_change", args=[job.pk]),
        reverse("admin:scheduler_execution_changelist"),
        reverse("admin:scheduler_execution_change", args=[execution.pk]),
    ]
    for url in pages:
        text = visible_text(staff.get(url).content.decode())
        assert "2026-11-30 11:40:33 UTC" in text, url
        assert "Nov. 30, 2026" not in text, url


def test_the_overlap_policy_is_edited_in_the_form_and_singleton_follows(staff):
    job = JobFactory(name="report", singleton=True)
    url = reverse("admin:scheduler_job_change", args=[job.pk])
    answer = staff.post(url, edit_form(job, overlap="queue", max_concurrent="2", max_queue="4"))
    assert answer.status_code == 302, answer.content.decode()[:2000]
    job.refresh_from_db()
    assert (job.overlap, job.singleton, job.max_concurrent, job.max_queue) == ("queue", False, 2, 4)


def test_a_queue_limit_on_a_policy_that_is_not_queue_is_refused_naming_it(staff):
    answer = staff.post(reverse("admin:scheduler_job_add"), job_form(max_concurrent="3"))
    assert answer.status_code == 200
    assert "only with overlap: queue" in answer.content.decode()
    assert not Job.objects.exists()


def test_a_concurrency_group_lists_its_running_executions(staff):
    from scheduler.models import ConcurrencyGroup

    group = ConcurrencyGroup.objects.create(name="vendor-api", max_concurrent=4)
    job = JobFactory(concurrency_group=group)
    ExecutionFactory(job=job, state=Execution.RUNNING)
    page = staff.get(reverse("admin:scheduler_concurrencygroup_changelist")).content.decode()
    assert re.search(r"field-running[^>]*>1<", page), page[:3000]


def test_a_chain_that_closes_a_cycle_is_refused_in_the_form(staff):
    JobFactory(name="import", on_success=["report"])
    job = JobFactory(name="report")
    url = reverse("admin:scheduler_job_change", args=[job.pk])
    answer = staff.post(url, edit_form(job, on_success="import"))
    assert answer.status_code == 200
    assert "the chain forms a cycle: report -&gt; import -&gt; report" in answer.content.decode()
    job.refresh_from_db()
    assert job.on_success == []
