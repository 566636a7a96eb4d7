"""Grouped incidents: a failure storm on one pool or runner is one message."""

import datetime as dt
import threading

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from notifications import incidents, routing
from notifications.apps import NotificationsConfig
from notifications.models import Notification
from tests.factories import JobFactory

from .conftest import T0, failure, make_channel, make_rule

pytestmark = pytest.mark.django_db

SECOND = dt.timedelta(seconds=1)
POOL = ["linux", "db"]


@pytest.fixture(autouse=True)
def incident_settings(settings):
    settings.CRONIQ_INCIDENT_WINDOW = 300.0
    settings.CRONIQ_INCIDENT_THRESHOLD = 3


@pytest.fixture
def rule(channel):
    return make_rule("failures", incidents.FAILURES, [channel])


def fail(job, at, name="execution.failed", runner=None, **data):
    failure(name, job=job, at=at, runner=runner, data=data)
    routing.route_pending(at)


def outgoing(channel):
    """What the channel's receivers get: notifications that go out alone,
    and incidents (open or closed)."""
    alone = Notification.objects.filter(channel=channel, state__in=["pending", "delivered"])
    return (
        alone.exclude(name="incident.grouped").count()
        + Notification.objects.filter(channel=channel, name="incident.grouped").count()
    )


def test_past_the_threshold_other_jobs_failures_join_one_incident(rule, channel, runner):
    jobs = [JobFactory(name=f"etl-{i}", labels=POOL) for i in range(6)]
    for i, job in enumerate(jobs):
        fail(job, T0 + i * SECOND, runner=runner)

    alone = Notification.objects.filter(state="pending").order_by("created_at")
    assert [n.job.name for n in alone] == ["etl-0", "etl-1", "etl-2"]
    incident = Notification.objects.get(name="incident.grouped")
    assert (incident.state, incident.pool, incident.runner_name) == ("grouped", "db,linux", "")
    assert incident.next_attempt_at == T0 + 3 * SECOND + dt.timedelta(seconds=300)
    members = incident.members.order_by("created_at")
    assert [(n.job.name, n.state) for n in members] == [(f"etl-{i}", "grouped") for i in (3, 4, 5)]


def test_one_job_failing_its_retries_is_not_a_storm(rule, channel):
    job = JobFactory(labels=POOL)
    for attempt in range(3):
        fail(job, T0 + attempt * SECOND)
    fail(job, T0 + 3 * SECOND, name="execution.given_up", attempts=3)
    fail(job, T0 + 3 * SECOND, name="job.failing", streak=1)
    assert not Notification.objects.filter(name="incident.grouped").exists()
    assert Notification.objects.filter(state="pending").count() == 5


def test_an_incident_is_sent_when_its_window_closes(rule, channel, runner, settings):
    settings.CRONIQ_PUBLIC_URL = "https://croniq.example.com"
    jobs = [JobFactory(name=f"etl-{i}", labels=POOL) for i in range(5)]
    for i, job in enumerate(jobs):
        fail(job, T0 + i * 20 * SECOND, runner=runner)
    fail(jobs[4], T0 + 100 * SECOND, name="job.failing", runner=runner, streak=1)
    incident = Notification.objects.get(name="incident.grouped")
    opened = incident.created_at

    assert incidents.close_incidents(opened + 299 * SECOND) == 0
    closes = opened + 300 * SECOND
    # The loop looks again at the window's end (every 5 s at most).
    assert incidents.next_close(opened + 299 * SECOND) == closes
    assert incidents.close_incidents(closes) == 1
    incident.refresh_from_db()
    assert (incident.state, incident.next_attempt_at) == ("pending", closes)
    assert incident.message == {
        "id": str(incident.id),
        "event": "incident.grouped",
        "at": closes.isoformat(),
        "summary": "5 jobs needing `db,linux` failed in 2 min, last runner: build-3",
        "details": [
            "etl-0: execution.failed",
            "etl-1: execution.failed",
            "etl-2: execution.failed",
            "etl-3: execution.failed",
            "etl-4: execution.failed, job.failing",
        ],
        "url": "https://croniq.example.com/",
    }
    assert incidents.close_incidents(closes + SECOND) == 0


def test_a_storm_of_500_jobs_on_one_pool_reaches_each_channel_at_most_threshold_plus_one_times(
    runner,
):
    channels = [make_channel("ops-hook"), make_channel("ops-mail", kind="email", to=["o@x.io"])]
    make_rule("failures", ["execution.given_up"], channels)
    jobs = JobFactory.create_batch(500, labels=POOL)
    # 500 failures in one minute, routed as the notifier would: every 50.
    for i, job in enumerate(jobs):
        failure("execution.given_up", job=job, runner=runner, at=T0 + i * 0.12 * SECOND)
        if i % 50 == 49:
            routing.route_pending(T0 + i * 0.12 * SECOND)
    closed = incidents.close_incidents(T0 + 400 * SECOND)

    assert closed == 2
    for channel in channels:
        sent = Notification.objects.filter(channel=channel, state="pending")
        assert sent.count() == outgoing(channel) == 4  # threshold 3, + 1 incident
        incident = sent.get(name="incident.grouped")
        assert incident.message["summary"] == (
            "500 jobs needing `db,linux` failed in 1 min, last runner: build-3"
        )
        assert len(incident.message["details"]) == 51
        assert incident.message["details"][-1] == "... and 450 more jobs"
        assert incident.members.count() == 497


def test_failures_of_different_pools_on_one_runner_group_by_runner(rule, channel, runner):
    for i in range(5):
        fail(JobFactory(name=f"misc-{i}", labels=[f"team-{i}"]), T0 + i * SECOND, runner=runner)
    incident = Notification.objects.get(name="incident.grouped")
    assert (incident.pool, incident.runner_name) == ("", "build-3")
    assert incident.members.count() == 2
    incidents.close_incidents(T0 + 400 * SECOND)
    incident.refresh_from_db()
    assert incident.message["summary"] == "5 jobs failed on runner build-3 in 1 min"
    assert incident.message["runner"] == {"name": "build-3"}
    assert incident.message["url"].endswith("/runners/")


def test_failures_spread_beyond_the_window_go_out_alone(rule, channel):
    for i in range(6):
        fail(JobFactory(labels=POOL), T0 + i * 150 * SECOND)
    # At most two others within any 300 s: never past the threshold.
    assert not Notification.objects.filter(name="incident.grouped").exists()
    assert Notification.objects.filter(state="pending").count() == 6


def test_a_storm_outlasting_its_incident_opens_the_next_one_at_once(rule, channel):
    for i in range(5):
        fail(JobFactory(labels=POOL), T0 + i * SECOND)
    first = Notification.objects.get(name="incident.grouped")
    closes = first.next_attempt_at
    incidents.close_incidents(closes)
    # Still failing right after: no new round of single notifications.
    fail(JobFactory(name="late-1", labels=POOL), closes + SECOND)
    second = Notification.objects.get(name="incident.grouped", state="grouped")
    assert second.members.count() == 1
    assert Notification.objects.filter(state="pending").exclude(pk=first.pk).count() == 3
    # It names its own failures, not those the first one told.
    incidents.close_incidents(second.next_attempt_at)
    second.refresh_from_db()
    assert second.message["details"] == ["late-1: execution.failed"]

    # A window after the last incident closed, the storm is over.
    fail(JobFactory(labels=POOL), second.next_attempt_at + 301 * SECOND)
    assert (
        Notification.objects.filter(state="pending").exclude(name="incident.grouped").count() == 4
    )


def test_muted_and_throttled_failures_neither_count_nor_join(channel):
    make_rule("failures", ["execution.failed"], [channel], throttle=3600)
    job = JobFactory(labels=POOL)
    for i in range(6):
        fail(job, T0 + i * SECOND)  # one out, five throttled
    fail(JobFactory(labels=POOL), T0 + 10 * SECOND)
    fail(JobFactory(labels=POOL), T0 + 11 * SECOND)
    assert not Notification.objects.filter(name="incident.grouped").exists()
    assert Notification.objects.filter(state="suppressed").count() == 5


def test_each_channel_has_its_own_incidents():
    hook, chat = make_channel("hook"), make_channel("chat", kind="slack", url="https://c.io/x")
    make_rule("all", ["execution.failed"], [hook])
    make_rule("db-team", ["execution.failed"], [chat], labels=["db"])
    for i in range(4):
        fail(JobFactory(labels=POOL), T0 + i * SECOND)
    for i in range(4):
        fail(JobFactory(labels=["linux"]), T0 + (10 + i) * SECOND)
    hook_incidents = Notification.objects.filter(name="incident.grouped", channel=hook)
    assert sorted(hook_incidents.values_list("pool", flat=True)) == ["db,linux", "linux"]
    chat_incident = Notification.objects.get(name="incident.grouped", channel=chat)
    assert chat_incident.pool == "db,linux"
    assert [n.channel for n in chat_incident.members.all()] == [chat]


def test_with_no_incident_to_close_the_step_only_reads():
    """No write transaction each second: on SQLite it would wait for the notifier."""
    with CaptureQueriesContext(connections["default"]) as queries:
        assert incidents.close_incidents(T0) == 0
    assert len(queries) == 1
    assert queries[0]["sql"].lstrip().upper().startswith("SELECT")


def test_the_loop_closes_incidents_and_sends_digests():
    steps = {step.name: step for step in NotificationsConfig.loop_steps(None, loop=None)}
    assert steps["incidents_closed"].run is incidents.close_incidents
    assert steps["incidents_closed"].every == 1.0
    assert steps["digests"].every == 30.0


def test_jobs_without_labels_are_one_pool(rule, channel):
    for i in range(4):
        fail(JobFactory(name=f"plain-{i}", labels=[]), T0 + i * SECOND)
    incident = Notification.objects.get(name="incident.grouped")
    assert incident.pool == "" and incident.runner_name == ""
    assert (
        incident.message["summary"] == "jobs without labels are failing: grouping until 02:05 UTC"
    )
    incidents.close_incidents(incident.next_attempt_at)
    incident.refresh_from_db()
    assert incident.message["summary"] == "4 jobs without labels failed in 1 min"


def test_no_failure_joins_an_incident_already_sent(postgres_only, settings):
    """Routers add failures to incidents while closers send them (their
    windows already over): every incident sent names all its members."""
    settings.CRONIQ_INCIDENT_THRESHOLD = 3
    channel = make_channel()
    make_rule("failures", ["execution.failed"], [channel])
    for job in JobFactory.create_batch(300, labels=POOL):
        failure(job=job)
    window_over = T0 + 300 * SECOND
    routed, errors = threading.Event(), []

    def route():
        try:
            while routing.route_pending(T0, limit=5):
                pass
        except Exception as error:  # surfaced below: a racer must never fail
            errors.append(error)
        finally:
            connections.close_all()

    def close():
        try:
            while not routed.is_set():
                incidents.close_incidents(window_over)
        except Exception as error:
            errors.append(error)
        finally:
            connections.close_all()

    routers = [threading.Thread(target=route) for _ in range(2)]
    closers = [threading.Thread(target=close) for _ in range(2)]
    for thread in routers + closers:
        thread.start()
    for thread in routers:
        thread.join()
    routed.set()
    for thread in closers:
        thread.join()
    assert errors == []
    incidents.close_incidents(window_over)

    sent = Notification.objects.filter(name="incident.grouped")
    assert sent.count() > 1 and not sent.filter(state="grouped").exists()
    # Each names all its members (the first also the 3 that went out alone;
    # all were routed at the same instant here, so any may count as first).
    for incident in sent:
        named = int(incident.message["summary"].split()[0])
        assert named - incident.members.count() in (0, 3)
    assert (
        Notification.objects.filter(state="grouped").exclude(name="incident.grouped").count() == 297
    )


def test_with_no_incident_open_the_loop_looks_every_five_seconds_or_a_shorter_window(db, settings):
    assert incidents.next_close(T0) == T0 + 5 * SECOND
    settings.CRONIQ_INCIDENT_WINDOW = 2
    assert incidents.next_close(T0) == T0 + 2 * SECOND
