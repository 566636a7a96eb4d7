"""What each event says, and the docs/design.md §9 body around it."""

import datetime as dt
import uuid

import pytest

from notifications import messages
from notifications.recording import record_event
from scheduler.models import Execution
from scheduler.runs import lifecycle
from tests.factories import ExecutionFactory, JobFactory

from .conftest import T0

pytestmark = pytest.mark.django_db

ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


@pytest.fixture(autouse=True)
def public_url(settings):
    settings.CRONIQ_PUBLIC_URL = "https://croniq.example.com"


def running(job, runner, attempt=1, seconds=42, scheduled_for=T0):
    return ExecutionFactory(
        job=job,
        scheduled_for=scheduled_for,
        attempt=attempt,
        state=Execution.RUNNING,
        runner=runner,
        lease=1,
        claimed_at=T0 - dt.timedelta(seconds=seconds),
    )


def events_of(execution):
    from notifications.models import Event

    return {event.name: event for event in Event.objects.filter(execution=execution)}


def test_a_failed_attempt_names_exit_code_runner_and_attempt(job, runner):
    execution = running(job, runner, attempt=2)
    lifecycle.settle(execution, Execution.FAILED, T0, exit_code=3)
    event = events_of(execution)["execution.failed"]
    assert messages.summary(event) == "billing-sync failed (exit 3) on build-3, attempt 2 of 3"


def test_a_failure_for_good_and_the_streak_it_starts(runner):
    job = JobFactory(name="billing-sync", retries=0)
    execution = running(job, runner)
    lifecycle.settle(execution, Execution.FAILED, T0, exit_code=3)
    found = events_of(execution)
    assert messages.summary(found["execution.given_up"]) == (
        "billing-sync failed for good after 1 attempt (exit 3) on build-3"
    )
    assert messages.summary(found["job.failing"]) == (
        "billing-sync has failed 1 run in a row since 02:00 UTC"
    )


def test_an_attempt_given_up_says_how_it_ended(runner):
    job = JobFactory(name="nightly", retries=0)
    timed_out = running(job, runner, seconds=900)
    lifecycle.settle(timed_out, Execution.TIMED_OUT, T0)
    assert messages.summary(events_of(timed_out)["execution.given_up"]) == (
        "nightly timed out for good after 1 attempt on build-3"
    )


def test_timed_out_and_lost_attempts(job, runner):
    timed_out = running(job, runner, seconds=900)
    lifecycle.settle(timed_out, Execution.TIMED_OUT, T0)
    assert messages.summary(events_of(timed_out)["execution.timed_out"]) == (
        "billing-sync timed out after 15m on build-3, attempt 1 of 3"
    )
    lost = running(job, runner, attempt=2, scheduled_for=T0 - dt.timedelta(hours=1))
    lifecycle.settle(lost, Execution.LOST, T0, lost_reason="lease_expired")
    assert messages.summary(events_of(lost)["execution.lost"]) == (
        "billing-sync was lost on build-3 (its runner stopped answering), attempt 2"
    )


def event(name, data, **subjects):
    return record_event(name, at=T0, data=data, **subjects)


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        (
            "job.failing",
            {"streak": 3, "failing_since": "2026-06-01T02:00:00+00:00"},
            "billing-sync has failed 3 runs in a row since 02:00 UTC",
        ),
        (
            "job.recovered",
            {"streak": 4, "failing_since": "2026-06-01T01:00:00+00:00"},
            "billing-sync recovered after 4 failed runs",
        ),
        (
            "job.missed",
            {"scheduled_for": "2026-06-01T01:55:00+00:00", "grace": 300},
            "billing-sync missed its 01:55 UTC run: not started 5m after",
        ),
        (
            "job.slow",
            {"elapsed": 2700.4, "max_duration": None, "p95": 900.0, "factor": 3.0},
            "billing-sync has been running for 45m, over 3x its usual 15m",
        ),
        (
            "job.slow",
            {"elapsed": 1000.0, "max_duration": 900, "p95": None, "factor": None},
            "billing-sync has been running for 16m40s, past its maximum of 15m",
        ),
        (
            "job.fast",
            {"duration": 2.0, "min_duration": 60},
            "billing-sync finished in 2s, under its minimum of 1m",
        ),
    ],
)
def test_job_event_summaries(job, name, data, expected):
    assert messages.summary(event(name, data, job=job)) == expected


def test_runner_and_scheduler_summaries(runner):
    offline = event("runner.offline", {"last_seen_at": "2026-06-01T02:04:11+00:00"}, runner=runner)
    assert messages.summary(offline) == "runner build-3 is offline (last seen 02:04:11 UTC)"
    flapping = event("runner.flapping", {"takeovers": 5, "window": 600}, runner=runner)
    assert messages.summary(flapping) == "runner build-3 is flapping: taken over 5 times in 10m"
    unserved = event("labels.unserved", {"labels": ["gpu"], "pending": 3, "grace": 300})
    assert messages.summary(unserved) == (
        "3 executions wait for labels gpu: no online runner carries them"
    )
    stalled = event("scheduler.stalled", {"stalled_for": 130, "grace": 60})
    assert messages.summary(stalled) == "the scheduler has not ticked for 2m10s"
    since = event("scheduler.stalled", {"last_tick": "2026-06-01T01:59:00+00:00"})
    assert messages.summary(since) == "the scheduler has not ticked for 1m"


def test_times_read_in_the_dashboards_time_zone(job, settings):
    settings.TIME_ZONE = "Europe/Paris"
    failing = event("job.failing", {"streak": 2, "failing_since": T0.isoformat()}, job=job)
    assert messages.summary(failing) == "billing-sync has failed 2 runs in a row since 04:00 CEST"


def test_the_body_has_the_contract_fields_and_links_to_the_execution(job, runner):
    execution = running(job, runner, attempt=2)
    lifecycle.settle(execution, Execution.FAILED, T0, exit_code=3)
    failed = events_of(execution)["execution.failed"]
    body = messages.message(ID, failed, {"details": ["+1 more"]})
    assert body == {
        "id": str(ID),
        "event": "execution.failed",
        "at": "2026-06-01T02:00:00+00:00",
        "summary": "billing-sync failed (exit 3) on build-3, attempt 2 of 3",
        "job": {"name": "billing-sync", "owner": "team-a", "labels": ["linux", "db"]},
        "execution": {
            "id": execution.pk,
            "scheduled_for": execution.scheduled_for.isoformat(),
            "attempt": 2,
            "state": "failed",
            "exit_code": 3,
            "duration": 42.0,
        },
        "details": ["+1 more"],
        "url": f"https://croniq.example.com/executions/{execution.pk}/",
    }


def test_the_url_is_the_page_of_the_events_subject(job, runner):
    def url(**subjects):
        return messages.message(ID, event("job.missed", {}, **subjects))["url"]

    assert url(job=job) == "https://croniq.example.com/jobs/billing-sync/"
    assert url(runner=runner) == "https://croniq.example.com/runners/"
    assert url() == "https://croniq.example.com/"
    unserved = event("labels.unserved", {"labels": ["gpu"]})
    assert messages.message(ID, unserved)["url"] == "https://croniq.example.com/runners/"
    stalled = messages.message(ID, event("scheduler.stalled", {"stalled_for": 90}))
    assert "job" not in stalled and "execution" not in stalled and "runner" not in stalled


def test_the_message_survives_the_deletion_of_its_job(runner):
    job = JobFactory(name="old-report")
    gone = event("job.recovered", {"streak": 2}, job=job)
    job.delete()
    gone.refresh_from_db()
    body = messages.message(ID, gone)
    assert body["summary"] == "old-report recovered after 2 failed runs"
    assert body["url"] == "https://croniq.example.com/jobs/old-report/"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (59.6, "1m"), (130, "2m10s"), (3600, "1h"), (3900, "1h05m"), (90000, "1d1h")],
)
def test_durations_read_short(seconds, text):
    assert messages.duration(seconds) == text
