"""The dashboard's buttons do what the admin actions do, audited, and say so."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from audit.models import AuditEvent
from scheduler.models import Execution

from .conftest import NOW


@pytest.fixture
def root_client(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", password=None))
    return client


def test_run_now_starts_a_manual_run_audited_with_the_user(root_client, make_job):
    job = make_job("nightly")
    answer = root_client.post(reverse("dashboard:job-run", args=[job.name]), follow=True)
    run = job.executions.get()
    assert run.trigger == Execution.MANUAL and run.state == Execution.PENDING
    assert f"Run {run.pk} of nightly started." in answer.content.decode()
    event = AuditEvent.objects.get(action="job.run_now")
    assert event.actor_name == "root"


def test_run_now_of_a_busy_singleton_is_refused_with_a_message(
    root_client, make_job, make_execution
):
    job = make_job("nightly", singleton=True)
    make_execution(job, state=Execution.RUNNING, singleton=True)
    answer = root_client.post(reverse("dashboard:job-run", args=[job.name]), follow=True)
    assert answer.redirect_chain == [(reverse("dashboard:job", args=[job.name]), 302)]
    assert "already has a live execution" in answer.content.decode()
    assert job.executions.count() == 1


def test_pause_then_resume_from_the_job_page(root_client, make_job):
    job = make_job("nightly")
    answer = root_client.post(
        reverse("dashboard:job-pause", args=[job.name]), {"reason": "disk full"}, follow=True
    )
    assert "nightly paused: disk full" in answer.content.decode()
    job.refresh_from_db()
    assert job.paused_at is not None and job.pause_reason == "disk full"
    event = AuditEvent.objects.get(action="job.paused")
    assert (event.actor_name, event.data) == ("root", {"reason": "disk full"})
    page = root_client.get(reverse("dashboard:job", args=[job.name])).content.decode()
    assert 'data-action="job.resume"' in page and 'data-action="job.pause"' not in page
    assert "disk full" in page
    root_client.post(reverse("dashboard:job-resume", args=[job.name]))
    job.refresh_from_db()
    assert job.paused_at is None


def test_retry_goes_to_the_new_attempt(root_client, make_job, make_execution):
    failed = make_execution(make_job("nightly"), state=Execution.FAILED)
    answer = root_client.post(reverse("dashboard:execution-retry", args=[failed.pk]))
    new = Execution.objects.get(attempt=2)
    assert new.scheduled_for == NOW
    assert answer["Location"] == reverse("dashboard:execution", args=[new.pk])


def test_retrying_a_run_that_is_not_finished_changes_nothing(root_client, make_job, make_execution):
    running = make_execution(make_job("nightly"), state=Execution.RUNNING)
    answer = root_client.post(reverse("dashboard:execution-retry", args=[running.pk]), follow=True)
    assert "not retryable" in answer.content.decode()
    assert Execution.objects.count() == 1


def test_an_action_on_something_that_does_not_exist_is_a_404(root_client, db):
    assert root_client.post(reverse("dashboard:job-run", args=["nope"])).status_code == 404
    assert root_client.post(reverse("dashboard:runner-drain", args=[999])).status_code == 404


def test_forget_releases_the_runners_work(root_client, make_job, make_execution, make_runner):
    runner = make_runner("web-1")
    make_execution(make_job("nightly"), state=Execution.RUNNING, runner=runner)
    answer = root_client.post(reverse("dashboard:runner-forget", args=[runner.pk]), follow=True)
    assert "web-1 forgotten, 1 run(s) released." in answer.content.decode()
    assert not Execution.objects.filter(state=Execution.RUNNING).exists()


@pytest.mark.parametrize("reason", ["", "   ", "x" * 201])
def test_a_pause_without_a_sensible_reason_is_refused_and_changes_nothing(
    root_client, make_job, reason
):
    job = make_job("nightly")
    answer = root_client.post(
        reverse("dashboard:job-pause", args=[job.name]), {"reason": reason}, follow=True
    )
    assert "nightly not paused: give a reason of 1 to 200 characters." in answer.content.decode()
    job.refresh_from_db()
    assert job.paused_at is None
    assert not AuditEvent.objects.filter(action="job.paused").exists()


def test_actions_with_nothing_to_do_say_so(root_client, make_job, make_execution, make_runner):
    job = make_job("nightly")
    finished = make_execution(job, state=Execution.SUCCEEDED)
    runner = make_runner("web-1")
    cases = [
        (reverse("dashboard:job-resume", args=[job.name]), "nightly was not paused."),
        (reverse("dashboard:execution-cancel", args=[finished.pk]), "nothing to cancel"),
        (reverse("dashboard:runner-resume", args=[runner.pk]), "web-1 was not draining."),
    ]
    for url, message in cases:
        assert message in root_client.post(url, follow=True).content.decode()
    root_client.post(reverse("dashboard:runner-drain", args=[runner.pk]))
    again = root_client.post(reverse("dashboard:runner-drain", args=[runner.pk]), follow=True)
    assert "web-1 was draining already." in again.content.decode()
    assert AuditEvent.objects.filter(action="runner.drained").count() == 1


def test_every_button_asks_for_confirmation(root_client, make_job, make_execution, make_runner):
    job = make_job("nightly")
    pending = make_execution(job, state=Execution.PENDING)
    failed = make_execution(job, NOW - timedelta(hours=1), state=Execution.FAILED)
    make_runner("web-1")
    make_runner("web-2", state="draining", drained=True)
    pages = [
        reverse("dashboard:job", args=[job.name]),
        reverse("dashboard:execution", args=[pending.pk]),
        reverse("dashboard:execution", args=[failed.pk]),
        reverse("dashboard:runners"),
    ]
    buttons = []
    for url in pages:
        html = root_client.get(url).content.decode()
        buttons += re.findall(r"<button[^>]*data-action[^>]*>", html)
    actions = {re.search(r'data-action="([^"]+)"', b).group(1) for b in buttons}
    assert actions == {
        "job.run", "job.pause", "execution.cancel", "execution.retry",
        "runner.drain", "runner.resume", "runner.forget",
    }  # fmt: skip
    assert all("data-confirm=" in button for button in buttons)
    paused = make_job("paused", paused_at=NOW)
    page = root_client.get(reverse("dashboard:job", args=[paused.name])).content.decode()
    assert re.search(r'<button[^>]*data-action="job.resume"[^>]*data-confirm=', page)


def test_the_pause_form_asks_for_a_reason(root_client, make_job):
    page = root_client.get(reverse("dashboard:job", args=[make_job("nightly").name]))
    assert re.search(r'<input name="reason" required maxlength="200"', page.content.decode())


def test_drain_is_offered_only_for_a_runner_it_applies_to(root_client, make_runner):
    make_runner("web-1")
    make_runner("web-2", state="offline")
    make_runner("web-3", state="offline", drained=True)
    html = root_client.get(reverse("dashboard:runners")).content.decode()

    def offered(name):
        row = re.search(rf'<tr data-runner="{name}".*?</tr>', html, re.S).group(0)
        return re.findall(r'data-action="([^"]+)"', row)

    assert offered("web-1") == ["runner.drain", "runner.forget"]
    # Offline, it takes no work: nothing to drain. Forgetting it still applies.
    assert offered("web-2") == ["runner.forget"]
    # Drained before it went offline: resuming applies (it gets work when back).
    assert offered("web-3") == ["runner.resume", "runner.forget"]


def test_a_drain_posted_for_an_offline_runner_changes_nothing(root_client, make_runner):
    runner = make_runner("web-2", state="offline")
    answer = root_client.post(reverse("dashboard:runner-drain", args=[runner.pk]), follow=True)
    assert "web-2 is offline: it takes no work to drain." in answer.content.decode()
    runner.refresh_from_db()
    assert (runner.state, runner.drained) == ("offline", False)
    assert not AuditEvent.objects.filter(action="runner.drained").exists()
