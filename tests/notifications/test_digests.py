"""The daily digest: one message per rule and channel, once a day."""

import datetime as dt

import pytest

from notifications import digests, routing
from notifications.models import Notification
from tests.factories import JobFactory

from .conftest import T0, failure, make_channel, make_rule

pytestmark = pytest.mark.django_db


def at(hour, minute=0, second=0, day=1):
    return dt.datetime(2026, 6, day, hour, minute, second, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def digest_settings(settings):
    settings.CRONIQ_DIGEST_AT = "08:00"
    settings.TIME_ZONE = "UTC"
    settings.CRONIQ_PUBLIC_URL = "https://croniq.example.com"


@pytest.fixture
def channels():
    return [make_channel("hook"), make_channel("mail", kind="email", to=["ops@example.com"])]


@pytest.fixture
def daily(channels):
    return make_rule("daily", ["execution.failed", "job.recovered"], channels, digest=True)


def fail(job, instant):
    failure(job=job, at=instant)
    routing.route_pending(instant)


def test_the_digest_goes_out_at_the_digest_time_once(daily, channels, job):
    fail(job, at(2))
    fail(JobFactory(name="report"), at(3, 30))
    assert Notification.objects.filter(state="digest").count() == 4

    assert digests.send_digests(at(7, 59, 59)) == 0
    assert digests.send_digests(at(8)) == 2
    assert digests.send_digests(at(8, 0, 30)) == 0  # the step ran twice this minute

    for channel in channels:
        digest = Notification.objects.get(name="digest", channel=channel)
        assert (digest.state, digest.rule, digest.job) == ("pending", daily, None)
        assert digest.created_at == digest.next_attempt_at == at(8)
        assert digest.message == {
            "id": str(digest.id),
            "event": "digest",
            "at": at(8).isoformat(),
            "summary": "Daily digest of daily: 2 notifications since 02:00 UTC",
            "details": [
                "02:00 UTC billing-sync failed (exit 3), attempt 1 of 3",
                "03:30 UTC report failed (exit 3), attempt 1 of 1",
            ],
            "url": "https://croniq.example.com/",
        }
        members = Notification.objects.filter(group=digest)
        assert sorted(members.values_list("state", flat=True)) == ["digested", "digested"]
    assert not Notification.objects.filter(state="digest").exists()


def test_what_arrives_after_the_digest_time_waits_for_tomorrows(daily, job):
    fail(job, at(8, 5))
    assert digests.send_digests(at(8, 10)) == 0
    assert digests.send_digests(at(7, 59, day=2)) == 0
    assert digests.send_digests(at(8, 0, 1, day=2)) == 2


def test_a_digest_missed_while_the_loop_was_down_goes_out_when_it_is_back(daily, job):
    fail(job, at(2))
    assert digests.send_digests(at(11, 15)) == 2


def test_each_rule_has_its_own_digest(daily, channels, job):
    make_rule("weekly-ish", ["execution.failed"], channels[:1], digest=True)
    fail(job, at(2))
    assert digests.send_digests(at(9)) == 3
    sent = Notification.objects.filter(name="digest").order_by("rule__name", "channel__name")
    assert [(n.rule.name, n.channel.name) for n in sent] == [
        ("daily", "hook"),
        ("daily", "mail"),
        ("weekly-ish", "hook"),
    ]


def test_the_digest_time_is_in_the_dashboards_time_zone(daily, job, settings):
    settings.TIME_ZONE = "Europe/Paris"  # 08:00 CEST is 06:00 UTC
    fail(job, T0)
    assert digests.send_digests(at(5, 59)) == 0
    assert digests.send_digests(at(6)) == 2
    digest = Notification.objects.filter(name="digest").first()
    assert digest.message["summary"] == "Daily digest of daily: 1 notification since 04:00 CEST"


def test_a_long_digest_is_cut_with_a_count(channels):
    make_rule("daily", ["execution.failed"], channels[:1], digest=True)
    job = JobFactory(labels=["pool"])
    for minute in range(203):
        failure(job=job, at=T0 + dt.timedelta(minutes=minute))
    while routing.route_pending(at(7)):
        pass
    digests.send_digests(at(8))
    details = Notification.objects.get(name="digest").message["details"]
    assert len(details) == 201 and details[-1] == "... and 3 more"
    # Each line at its event's time, not when it was routed.
    assert details[199].startswith("05:19 UTC ")


def test_a_bad_digest_time_is_named(settings):
    settings.CRONIQ_DIGEST_AT = "8am"
    with pytest.raises(ValueError, match="CRONIQ_DIGEST_AT"):
        digests.send_digests(at(9))
