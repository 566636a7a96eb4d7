"""The audit admin: viewable, filterable, never editable, cheap on big tables."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import audit
from audit.models import AuditEvent, Counter
from core.admin_mixins import CheapPaginator

# The test settings have no collected static files; whitenoise only warns.
pytestmark = pytest.mark.filterwarnings("ignore:No directory at:UserWarning")

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CHANGELIST = "admin:audit_auditevent_changelist"


@pytest.fixture
def admin_client(client, db):
    user = get_user_model().objects.create_superuser("root", password=None)
    client.force_login(user)
    return client


@pytest.fixture
def events(db):
    audit.record("runner.takeover", actor=("runner", "alpha"), data={"n": 1}, at=NOW)
    audit.record("job.changed", actor=("user", "alice"), at=NOW - timedelta(minutes=1))
    audit.record("execution.reaped", at=NOW - timedelta(minutes=2))
    return list(AuditEvent.objects.all())


def listed_actions(response):
    return sorted(event.action for event in response.context["cl"].result_list)


def test_a_superuser_sees_the_audit_changelist(admin_client, events):
    answer = admin_client.get(reverse(CHANGELIST))
    assert answer.status_code == 200
    assert listed_actions(answer) == ["execution.reaped", "job.changed", "runner.takeover"]


def test_the_changelist_offers_no_add_button_and_no_bulk_delete(admin_client, events):
    content = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert reverse("admin:audit_auditevent_add") not in content
    assert "delete_selected" not in content


def test_adding_an_event_through_the_admin_is_refused(admin_client, events):
    url = reverse("admin:audit_auditevent_add")
    assert admin_client.get(url).status_code == 403
    answer = admin_client.post(url, {"at": "2026-01-01 00:00:00", "action": "forged"})
    assert answer.status_code == 403
    assert not AuditEvent.objects.filter(action="forged").exists()


def test_an_event_can_be_viewed_but_not_changed(admin_client, events):
    event = events[0]
    url = reverse("admin:audit_auditevent_change", args=[event.pk])
    view = admin_client.get(url)
    assert view.status_code == 200
    assert "runner.takeover" in view.content.decode()
    assert "<pre>" in view.content.decode()
    answer = admin_client.post(url, {"action": "rewritten"})
    assert answer.status_code == 403
    event.refresh_from_db()
    assert event.action == "runner.takeover"


def test_an_event_cannot_be_deleted_through_the_admin(admin_client, events):
    url = reverse("admin:audit_auditevent_delete", args=[events[0].pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    assert AuditEvent.objects.count() == 3


def test_staff_without_the_view_permission_cannot_see_the_audit(client, events):
    user = get_user_model().objects.create_user("staff", password=None, is_staff=True)
    client.force_login(user)
    assert client.get(reverse(CHANGELIST)).status_code == 403


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"action": "job.changed"}, ["job.changed"]),
        ({"actor_kind__exact": "runner"}, ["runner.takeover"]),
        ({"actor_kind__exact": "system"}, ["execution.reaped"]),
        ({"q": "alice"}, ["job.changed"]),
    ],
)
def test_the_changelist_filters_and_searches(admin_client, events, query, expected):
    answer = admin_client.get(reverse(CHANGELIST), query)
    assert listed_actions(answer) == expected


def test_the_changelist_filters_by_target_type_and_searches_target_repr(admin_client, db):
    user = get_user_model().objects.create_user("bob")
    audit.record("user.changed", target=user, at=NOW)
    audit.record("execution.reaped", at=NOW)
    by_type = admin_client.get(reverse(CHANGELIST), {"target_type": "auth.user"})
    assert listed_actions(by_type) == ["user.changed"]
    by_repr = admin_client.get(reverse(CHANGELIST), {"q": "bob"})
    assert listed_actions(by_repr) == ["user.changed"]


def test_the_action_filter_offers_the_actions_recorded(admin_client, events):
    content = admin_client.get(reverse(CHANGELIST)).content.decode()
    for action in ("runner.takeover", "job.changed", "execution.reaped"):
        assert f"?action={action}" in content


def test_the_changelist_never_counts_the_whole_table(admin_client, events):
    with CaptureQueriesContext(connection) as queries:
        answer = admin_client.get(reverse(CHANGELIST), {"actor_kind__exact": "user"})
    assert answer.status_code == 200
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    assert counts
    assert all("LIMIT" in sql.upper() for sql in counts), counts


def test_the_cheap_paginator_stops_counting_at_its_limit(db):
    for minute in range(7):
        audit.record("tick", at=NOW - timedelta(minutes=minute))

    class Small(CheapPaginator):
        count_limit = 5

    paginator = Small(AuditEvent.objects.all(), 2)
    assert paginator.count == 5
    assert paginator.num_pages == 3
    assert CheapPaginator(AuditEvent.objects.all(), 2).count == 7


def test_counters_are_viewable_but_read_only(admin_client, db):
    audit.increment("croniq_retries_total", reason="lost")
    counter = Counter.objects.get()
    assert admin_client.get(reverse("admin:audit_counter_changelist")).status_code == 200
    assert admin_client.get(reverse("admin:audit_counter_add")).status_code == 403
    change = reverse("admin:audit_counter_change", args=[counter.pk])
    assert admin_client.post(change, {"value": 0}).status_code == 403
    counter.refresh_from_db()
    assert counter.value == 1


def test_the_scheduler_heartbeat_is_viewable(admin_client, db):
    audit.mark_tick(NOW)
    answer = admin_client.get(reverse("admin:audit_heartbeat_changelist"))
    assert answer.status_code == 200
    assert "scheduler_tick" in answer.content.decode()
