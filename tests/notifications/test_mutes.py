"""Mutes: refused when they make no sense, audited, honoured while active."""

import datetime as dt

import pytest

from audit.models import AuditEvent
from notifications import mutes, routing
from notifications.models import Mute, Notification
from tests.factories import JobFactory

from .conftest import T0, failure, make_channel, make_rule

pytestmark = pytest.mark.django_db

HOUR = dt.timedelta(hours=1)


@pytest.fixture
def rule(channel):
    return make_rule("failures", ["execution.failed"], [channel])


def test_a_mute_is_created_and_audited(rule, admin_user):
    mute = mutes.mute(rule=rule, until=T0 + HOUR, note=" deploy window ", actor=admin_user, now=T0)
    assert (mute.rule, mute.job, mute.until, mute.note) == (rule, None, T0 + HOUR, "deploy window")
    assert (mute.created_by, mute.created_at) == ("admin", T0)
    event = AuditEvent.objects.get(action="notification.muted")
    assert (event.actor_name, event.at, event.target_id) == ("admin", T0, str(mute.pk))
    assert event.data == {
        "rule": "failures",
        "job": None,
        "until": (T0 + HOUR).isoformat(),
        "note": "deploy window",
    }


@pytest.mark.parametrize(
    ("until", "note", "field"),
    [(T0, "maintenance", "until"), (T0 - HOUR, "maintenance", "until"), (T0 + HOUR, "  ", "note")],
)
def test_a_mute_in_the_past_or_without_a_note_is_refused(until, note, field):
    with pytest.raises(ValueError, match=f"^{field}: ") as refused:
        mutes.mute(until=until, note=note, actor=None, now=T0)
    assert refused.value.field == field
    assert not Mute.objects.exists()
    assert not AuditEvent.objects.exists()


def test_unmute_ends_it_now_and_is_audited_once(admin_user):
    mute = mutes.mute(until=T0 + HOUR, note="incident 42", actor=admin_user, now=T0)
    later = T0 + dt.timedelta(minutes=10)
    assert mutes.active_mutes(later) == [mute]
    assert mutes.unmute(mute, admin_user, later) is True
    assert mutes.active_mutes(later) == []
    assert Mute.objects.get().until == later
    assert mutes.unmute(mute, admin_user, later) is False
    unmuted = AuditEvent.objects.filter(action="notification.unmuted")
    assert [(e.actor_name, e.data["until"]) for e in unmuted] == [("admin", later.isoformat())]


def routed_states(event):
    routing.route_pending(T0)
    return list(Notification.objects.filter(event=event).values_list("state", flat=True))


def test_a_muted_rule_job_or_everything_mutes_its_notifications(rule, job):
    other_rule = make_rule("other", ["execution.failed"], [make_channel("other")])
    mutes.mute(rule=rule, until=T0 + HOUR, note="noisy rule", actor=None, now=T0)
    event = failure(job=job)
    assert routing.route_pending(T0) == 1
    states = dict(Notification.objects.filter(event=event).values_list("rule__name", "state"))
    assert states == {"failures": "muted", "other": "pending"}

    Mute.objects.all().delete()
    mutes.mute(job=job, until=T0 + HOUR, note="known broken", actor=None, now=T0)
    assert routed_states(failure(job=job)) == ["muted", "muted"]
    assert sorted(routed_states(failure(job=JobFactory()))) == ["pending", "pending"]

    Mute.objects.all().delete()
    mutes.mute(until=T0 + HOUR, note="datacenter move", actor=None, now=T0)
    assert routed_states(failure(job=JobFactory())) == ["muted", "muted"]
    # The job's mute, then everything's.
    assert other_rule.notifications.filter(state="muted").count() == 2


def test_a_mute_of_a_rule_for_one_job_mutes_only_that_pair(rule, job):
    mutes.mute(rule=rule, job=job, until=T0 + HOUR, note="flaky", actor=None, now=T0)
    assert routed_states(failure(job=job)) == ["muted"]
    assert routed_states(failure(job=JobFactory())) == ["pending"]


def test_an_expired_mute_is_ignored(rule, job):
    mutes.mute(until=T0 - dt.timedelta(minutes=1), note="old", actor=None, now=T0 - HOUR)
    assert routed_states(failure(job=job)) == ["pending"]
