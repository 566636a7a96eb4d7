"""From recorded events to notifications: once each, with the right state."""

import datetime as dt
import threading

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from notifications import routing, wakeup
from notifications.models import Event, Notification
from notifications.recording import record_event
from scheduler.models import Execution
from scheduler.runs import lifecycle
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

from .conftest import T0, failure, make_channel, make_rule

MINUTE = dt.timedelta(minutes=1)


@pytest.mark.django_db
def test_a_failed_run_becomes_one_pending_notification_per_rule_and_channel(job, runner, settings):
    settings.CRONIQ_PUBLIC_URL = "https://croniq.example.com"
    mail, hook = make_channel("ops-mail", kind="email", to=["ops@example.com"]), make_channel()
    make_rule("failures", ["execution.failed", "job.recovered"], [mail, hook])
    make_rule("team-a", ["execution.failed"], [hook], owner="team-a")
    make_rule("other-team", ["execution.failed"], [hook], owner="team-b")
    execution = ExecutionFactory(
        job=job, state=Execution.RUNNING, runner=runner, lease=1, claimed_at=T0 - MINUTE
    )
    lifecycle.settle(execution, Execution.FAILED, T0, exit_code=3)

    now = T0 + dt.timedelta(milliseconds=20)
    assert routing.route_pending(now) == 1
    made = Notification.objects.order_by("rule__name", "channel__name")
    assert [(n.rule.name, n.channel.name, n.state) for n in made] == [
        ("failures", "ops-hook", "pending"),
        ("failures", "ops-mail", "pending"),
        ("team-a", "ops-hook", "pending"),
    ]
    event = Event.objects.get()
    assert event.routed_at == now
    for notification in made:
        assert (notification.event, notification.name, notification.job) == (
            event,
            "execution.failed",
            job,
        )
        assert notification.created_at == notification.next_attempt_at == now
        assert notification.message["id"] == str(notification.id)
        assert notification.message["summary"] == (
            "billing-sync failed (exit 3) on build-3, attempt 1 of 3"
        )
        assert notification.message["url"] == (
            f"https://croniq.example.com/executions/{execution.pk}/"
        )
    assert len({n.id for n in made}) == 3


@pytest.mark.django_db
def test_routing_twice_routes_nothing_twice_and_takes_the_oldest_first(channel):
    make_rule("failures", ["execution.failed"], [channel])
    # Each on its own pool: five jobs failing together would make an incident.
    events = [failure(job=JobFactory(labels=[f"pool-{i}"])) for i in range(5)]
    record_event("runner.offline", at=T0, data={"labels": []})  # no rule wants it

    assert routing.route_pending(T0, limit=2) == 2
    routed = Notification.objects.values_list("event_id", flat=True)
    assert sorted(routed) == [events[0].pk, events[1].pk]
    assert routing.route_pending(T0, limit=200) == 4
    assert routing.route_pending(T0) == 0
    assert Notification.objects.count() == 5
    assert not Event.objects.filter(routed_at__isnull=True).exists()


@pytest.mark.django_db(transaction=True)
def test_a_round_with_no_unrouted_event_is_one_read_and_no_transaction(channel):
    make_rule("failures", ["execution.failed"], [channel])
    routing.route_pending(T0)

    with CaptureQueriesContext(connections["default"]) as queries:
        assert routing.route_pending(T0) == 0

    assert len(queries) == 1  # no BEGIN (SQLite's write lock), no routers' turn


@pytest.mark.django_db
def test_a_digest_rule_keeps_its_notifications_for_the_digest(channel, job):
    make_rule("daily", ["execution.failed"], [channel], digest=True)
    failure(job=job)
    routing.route_pending(T0)
    assert list(Notification.objects.values_list("state", flat=True)) == ["digest"]


def fail_at(job, minutes):
    at = T0 + minutes * MINUTE
    failure(job=job, at=at)
    routing.route_pending(at)
    return Notification.objects.filter(job=job).order_by("created_at").last()


@pytest.mark.django_db
def test_the_throttle_suppresses_and_the_next_one_out_sums_them_up(channel, job):
    make_rule("failures", ["execution.failed"], [channel], throttle=1800)
    first = fail_at(job, 0)
    assert first.state == "pending"
    # Delivered or pending, it holds the throttle for 30 minutes.
    Notification.objects.filter(pk=first.pk).update(state="delivered")
    held = [fail_at(job, minutes) for minutes in (10, 11, 12, 29)]
    assert [n.state for n in held] == ["suppressed"] * 4
    # Another job has its own throttle.
    assert fail_at(JobFactory(), 12).state == "pending"

    summing = fail_at(job, 30)
    assert summing.state == "pending"
    assert summing.message["details"] == ["+4 more execution.failed suppressed since 02:10 UTC"]
    assert Notification.objects.filter(group=summing).count() == 4

    # Each suppressed one is summed up once: the next window starts clean.
    after = fail_at(job, 61)
    assert after.state == "pending" and "details" not in after.message


@pytest.mark.django_db
def test_a_throttled_rule_tells_each_of_its_channels_once(job):
    mail, hook = make_channel("mail", kind="email", to=["ops@example.com"]), make_channel()
    make_rule("failures", ["execution.failed"], [mail, hook], throttle=600)
    fail_at(job, 0)
    fail_at(job, 1)
    states = Notification.objects.order_by("created_at", "channel__name")
    assert [(n.channel.name, n.state) for n in states] == [
        ("mail", "pending"),
        ("ops-hook", "pending"),
        ("mail", "suppressed"),
        ("ops-hook", "suppressed"),
    ]


@pytest.mark.django_db(transaction=True)
def test_pending_notifications_wake_the_notifier_after_commit(job):
    channel = make_channel()
    rule = make_rule("failures", ["execution.failed"], [channel])
    failure(job=job)
    wakeup.local.clear()
    routing.route_pending(T0)
    assert wakeup.local.is_set()

    rule.digest = True
    rule.save()
    failure(job=job, at=T0 + MINUTE)
    wakeup.local.clear()
    assert routing.route_pending(T0 + MINUTE) == 1
    assert not wakeup.local.is_set()  # nothing to deliver yet


RACERS = 4


def race(step):
    """Run `step` on RACERS threads at once until it finds nothing to do;
    the counts it returned."""
    barrier = threading.Barrier(RACERS)
    errors, done = [], []

    def run():
        try:
            barrier.wait()
            while count := step():
                done.append(count)
        except Exception as error:  # surfaced below: a racer must never fail
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return done


def test_racing_routers_create_each_notification_once(postgres_only):
    channels = [make_channel("a"), make_channel("b")]
    make_rule("failures", ["execution.failed", "job.failing"], channels)
    jobs = [JobFactory(name=f"race-{i}", labels=[f"pool-{i}"]) for i in range(60)]
    for job in jobs:
        failure(job=job)
        failure("job.failing", job=job, data={"streak": 1})

    routed = race(lambda: routing.route_pending(T0, limit=8))

    assert sum(routed) == 120
    pairs = list(Notification.objects.values_list("event_id", "channel_id"))
    assert len(pairs) == len(set(pairs)) == 240
    assert not Event.objects.filter(routed_at__isnull=True).exists()


def test_racing_routers_in_a_storm_still_send_threshold_plus_one(postgres_only, settings):
    settings.CRONIQ_INCIDENT_THRESHOLD = 3
    channels = [make_channel("a"), make_channel("b")]
    make_rule("failures", ["execution.given_up"], channels)
    for job in JobFactory.create_batch(80, labels=["linux", "db"]):
        failure("execution.given_up", job=job)

    race(lambda: routing.route_pending(T0, limit=5))

    for channel in channels:
        sent = Notification.objects.filter(channel=channel, state__in=["pending", "grouped"])
        assert sent.filter(state="pending").count() == 3
        incident = sent.get(name="incident.grouped")
        assert incident.members.count() == 77


@pytest.mark.django_db
def test_runner_events_are_throttled_per_runner(channel):
    make_rule("runners", ["runner.offline"], [channel], throttle=3600)

    def offline(runner, minutes):
        instant = T0 + minutes * MINUTE
        seen = {"last_seen_at": instant.isoformat(), "labels": []}
        record_event("runner.offline", at=instant, runner=runner, data=seen)
        routing.route_pending(instant)
        return Notification.objects.order_by("created_at").last()

    build3, build4 = RunnerFactory(name="build-3"), RunnerFactory(name="build-4")
    assert offline(build3, 0).state == "pending"
    assert offline(build4, 1).state == "pending"
    assert offline(build3, 2).state == "suppressed"
    back = offline(build3, 61)
    assert back.state == "pending"
    assert back.message["details"] == ["+1 more runner.offline suppressed since 02:02 UTC"]


@pytest.mark.django_db
def test_a_recovery_is_never_throttled_and_sums_up_what_was(channel, job):
    make_rule("failures", ["execution.failed", "job.recovered"], [channel], throttle=3600)
    fail_at(job, 0)
    fail_at(job, 5)
    fail_at(job, 6)
    record_event("job.recovered", at=T0 + 10 * MINUTE, job=job, data={"streak": 3})
    routing.route_pending(T0 + 10 * MINUTE)
    recovered = Notification.objects.get(name="job.recovered")
    assert recovered.state == "pending"
    assert recovered.message["summary"] == "billing-sync recovered after 3 failed runs"
    assert recovered.message["details"] == ["+2 more execution.failed suppressed since 02:05 UTC"]
