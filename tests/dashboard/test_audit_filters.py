from datetime import timedelta

import pytest
from django.urls import reverse

from audit.models import AuditEvent
from dashboard import queries
from tests.dashboard.conftest import NOW


@pytest.fixture
def events(db):
    def event(minutes, action, kind, actor, target_type="", target_id="", target_repr=""):
        return AuditEvent.objects.create(
            at=NOW - timedelta(minutes=minutes),
            action=action,
            actor_kind=kind,
            actor_name=actor,
            target_type=target_type,
            target_id=target_id,
            target_repr=target_repr,
        )

    return {
        "takeover": event(1, "runner.takeover", "runner", "web-1", "runners.runner", "7", "web-1"),
        "flap": event(2, "runner.flapping", "system", "", "runners.runner", "7", "web-1"),
        "pause": event(3, "job.pause", "user", "alice", "scheduler.job", "3", "nightly-report"),
        "reap": event(4, "execution.reaped", "system", "", "scheduler.execution", "70", "3@x#1"),
    }


def names(page, events):
    by_pk = {e.pk: name for name, e in events.items()}
    return [by_pk[e.pk] for e in page.items]


def test_audit_lists_newest_first_without_filters(events):
    assert names(queries.audit_events(), events) == ["takeover", "flap", "pause", "reap"]


def test_audit_filters_by_exact_action_or_by_prefix_ending_in_a_dot(events):
    assert names(queries.audit_events(action="runner.takeover"), events) == ["takeover"]
    assert names(queries.audit_events(action="runner."), events) == ["takeover", "flap"]
    assert names(queries.audit_events(action="runner"), events) == []


def test_audit_filters_by_actor_name_or_kind_and_name(events):
    assert names(queries.audit_events(actor="alice"), events) == ["pause"]
    assert names(queries.audit_events(actor="runner:web-1"), events) == ["takeover"]
    assert names(queries.audit_events(actor="user:web-1"), events) == []


def test_audit_filters_by_target_reference_or_description(events):
    assert names(queries.audit_events(target="runners.runner:7"), events) == ["takeover", "flap"]
    assert names(queries.audit_events(target="nightly"), events) == ["pause"]


def test_audit_page_paginates_without_counting(staff_client, django_assert_max_num_queries, db):
    AuditEvent.objects.bulk_create(
        AuditEvent(at=NOW - timedelta(seconds=i), action="job.pause", actor_name=f"u{i}")
        for i in range(queries.AUDIT_PER_PAGE + 5)
    )
    # Session, user, the user's permissions (two), the page, the maintenance banner.
    with django_assert_max_num_queries(6) as captured:
        first = staff_client.get(reverse("dashboard:audit"), {"action": "job.pause"})
    assert not any("COUNT(" in q["sql"].upper() for q in captured.captured_queries)
    second = staff_client.get(reverse("dashboard:audit"), {"action": "job.pause", "page": 2})

    assert first.context["page"].has_next
    assert len(first.context["page"].items) == queries.AUDIT_PER_PAGE
    assert len(second.context["page"].items) == 5
    assert not second.context["page"].has_next
    # The pager keeps the filter in its links.
    assert 'href="?action=job.pause&amp;page=2"' in first.content.decode()


def test_audit_form_shows_the_filters_it_applied(staff_client, events):
    answer = staff_client.get(reverse("dashboard:audit"), {"actor": "alice"})
    html = answer.content.decode()
    assert 'name="actor" value="alice"' in html
    assert "nightly-report" in html
    assert "web-1" not in html.split("<tbody>")[1]


def test_audit_targets_link_to_their_dashboard_pages(staff_client, events):
    html = staff_client.get(reverse("dashboard:audit")).content.decode()
    assert '<a href="/jobs/nightly-report/">nightly-report</a>' in html
    assert '<a href="/executions/70/">3@x#1</a>' in html
    assert '<a href="/runners/">web-1</a>' in html


def test_the_job_page_links_to_the_jobs_audit_trail(staff_client, make_job):
    job = make_job("nightly-report")
    html = staff_client.get(reverse("dashboard:job", args=[job.name])).content.decode()
    assert f'href="/audit/?target=scheduler.job:{job.pk}"' in html
