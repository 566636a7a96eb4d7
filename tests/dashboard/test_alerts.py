"""The Alerts page: what notifications did, what is muted, which jobs fail."""

from datetime import timedelta

import time_machine
from django.urls import reverse

from notifications.models import Channel, Delivery, Event, Mute, Notification, Rule
from scheduler.models import JobHealth
from tests.dashboard.conftest import NOW

# Session, user, permissions (two), counts, failing jobs, mutes, the page of
# notifications with their last latency: bounded whatever the table sizes.
ALERTS_QUERIES = 9  # with the maintenance banner's read


def make_notification(channel, job=None, state=Notification.DELIVERED, at=NOW, **fields):
    event = Event.objects.create(name=fields.pop("name", "execution.given_up"), at=at, job=job)
    return Notification.objects.create(
        event=event, name=event.name, channel=channel, job=job, state=state, created_at=at, **fields
    )


def deliver(notification, *tries):
    """Delivery rows for (ok, status, error, latency) tries, one a minute."""
    for attempt, (ok, status, error, latency) in enumerate(tries, 1):
        Delivery.objects.create(
            notification=notification,
            attempt=attempt,
            at=notification.created_at + timedelta(minutes=attempt),
            ok=ok,
            status_code=status,
            error=error,
            latency=latency,
        )


def alerts(client, **params):
    with time_machine.travel(NOW, tick=False):
        answer = client.get(reverse("dashboard:alerts"), params)
    assert answer.status_code == 200
    return answer.content.decode()


def row(html, marker):
    return html.split(marker)[1].split("</tr>")[0]


def test_recent_notifications_show_their_outcome_job_channel_and_last_try(staff_client, make_job):
    job = make_job("billing-sync")
    hook = Channel.objects.create(name="ops-hook", kind="webhook", url="https://hooks.example/x")
    ok = make_notification(
        hook,
        job,
        at=NOW - timedelta(minutes=10),
        attempts=2,
        delivered_at=NOW - timedelta(minutes=8),
        last_status=200,
        message={"summary": "billing-sync failed for good (exit 1)"},
    )
    deliver(ok, (False, 500, "HTTP 500", 0.4), (True, 200, "", 0.125))
    dead = make_notification(
        hook,
        None,
        state=Notification.GIVEN_UP,
        name="runner.offline",
        attempts=9,
        last_error="connection refused",
    )
    deliver(dead, (False, None, "connection refused", 5.0))

    html = alerts(staff_client)

    delivered = row(html, f'data-notification="{ok.pk}"')
    assert '<a href="/jobs/billing-sync/">billing-sync</a>' in delivered
    assert "billing-sync failed for good (exit 1)" in delivered
    assert "ops-hook" in delivered and "webhook" in delivered
    assert 'class="state state-delivered"' in delivered
    assert "<td>2</td>" in delivered
    assert "<code>200</code>" in delivered
    assert "2026-11-30 11:52:00 UTC" in delivered
    # The latency of the last try (0.125 s), not of the first failing one.
    assert "125 ms" in delivered
    given_up = row(html, f'data-notification="{dead.pk}"')
    assert "runner.offline" in given_up
    assert 'class="state state-given_up"' in given_up
    assert "connection refused" in given_up
    # Newest first.
    assert html.index(f'data-notification="{dead.pk}"') < html.index(f'data-notification="{ok.pk}"')


def test_notifications_page_without_counting_and_filter_by_state(staff_client, make_job):
    mail = Channel.objects.create(name="ops-mail", kind="email", to=["ops@example.com"])
    for i in range(55):
        make_notification(mail, at=NOW - timedelta(minutes=i))
    failed = make_notification(mail, state=Notification.GIVEN_UP, at=NOW - timedelta(hours=2))

    first = alerts(staff_client)
    second = alerts(staff_client, page=2)
    only_given_up = alerts(staff_client, state="given_up")

    assert first.count("data-notification=") == 50
    assert 'rel="next" href="?page=2"' in first
    assert second.count("data-notification=") == 6
    assert only_given_up.count("data-notification=") == 1
    assert f'data-notification="{failed.pk}"' in only_given_up
    # An unknown state shows everything rather than an error.
    assert alerts(staff_client, state="nonsense").count("data-notification=") == 50


def test_counts_by_state_cover_the_last_24_hours(staff_client):
    mail = Channel.objects.create(name="ops-mail", kind="email", to=["ops@example.com"])
    for _ in range(3):
        make_notification(mail)
    make_notification(mail, state=Notification.GIVEN_UP, at=NOW - timedelta(hours=23))
    make_notification(mail, state=Notification.SUPPRESSED)
    make_notification(mail, state=Notification.GIVEN_UP, at=NOW - timedelta(hours=25))

    html = alerts(staff_client)

    def card(state):
        return row(html, f'data-notification-state="{state}"').split('class="count">')[1][:3]

    assert card("delivered").startswith("3<")
    assert card("given_up").startswith("1<")
    assert card("suppressed").startswith("1<")
    assert card("pending").startswith("0<")


def test_failing_jobs_are_listed_worst_first_with_their_streak(staff_client, make_job):
    JobHealth.objects.create(
        job=make_job("flaky"),
        failure_streak=2,
        failing_since=NOW - timedelta(hours=2),
        last_failure_at=NOW - timedelta(minutes=30),
        last_success_at=NOW - timedelta(hours=3),
    )
    JobHealth.objects.create(
        job=make_job("broken", owner="team-a"),
        failure_streak=7,
        failing_since=NOW - timedelta(days=1),
        last_failure_at=NOW - timedelta(minutes=5),
    )
    JobHealth.objects.create(job=make_job("fine"), last_success_at=NOW)

    html = alerts(staff_client)

    broken = row(html, 'data-failing-job="broken"')
    assert '<a href="/jobs/broken/">broken</a>' in broken
    assert "team-a" in broken
    assert "<td data-streak>7</td>" in broken
    assert "2026-11-29 12:00:00 UTC" in broken  # failing since
    assert "never" in broken  # no success on record
    assert "<td data-streak>2</td>" in row(html, 'data-failing-job="flaky"')
    assert 'data-failing-job="fine"' not in html
    assert html.index('data-failing-job="broken"') < html.index('data-failing-job="flaky"')


def test_active_mutes_show_subject_until_note_and_who(staff_client, make_job):
    job = make_job("noisy")
    rule = Rule.objects.create(name="failures", events=["job.failing"])
    muted_job = Mute.objects.create(
        job=job, until=NOW + timedelta(hours=2), note="vendor outage", created_by="alice",
        created_at=NOW,
    )  # fmt: skip
    muted_rule = Mute.objects.create(
        rule=rule, until=NOW + timedelta(hours=1), note="deploy", created_at=NOW
    )
    everything = Mute.objects.create(
        until=NOW + timedelta(days=1), note="maintenance window", created_by="bob", created_at=NOW
    )
    Mute.objects.create(job=job, until=NOW - timedelta(minutes=1), note="over", created_at=NOW)

    html = alerts(staff_client)

    assert '<a href="/jobs/noisy/">noisy</a>' in row(html, f'data-mute="{muted_job.pk}"')
    assert "vendor outage" in row(html, f'data-mute="{muted_job.pk}"')
    assert "alice" in row(html, f'data-mute="{muted_job.pk}"')
    assert "<strong>failures</strong>" in row(html, f'data-mute="{muted_rule.pk}"')
    assert "<strong>everything</strong>" in row(html, f'data-mute="{everything.pk}"')
    assert "2026-12-01 12:00:00 UTC" in row(html, f'data-mute="{everything.pk}"')
    assert "over" not in html.split("Active mutes")[1].split("</table>")[0]
    # The one ending first on top.
    assert html.index(f'data-mute="{muted_rule.pk}"') < html.index(f'data-mute="{muted_job.pk}"')


def test_an_empty_installation_says_nothing_is_failing_or_muted(staff_client):
    html = alerts(staff_client)
    assert "No job is failing." in html
    assert "Nothing is muted." in html
    assert "No notifications yet" in html


def test_the_alerts_page_query_count_does_not_grow_with_rows(
    staff_client, make_job, django_assert_max_num_queries
):
    hook = Channel.objects.create(name="ops-hook", kind="webhook", url="https://hooks.example/x")
    for i in range(60):
        job = make_job(f"job-{i:02}")
        JobHealth.objects.create(job=job, failure_streak=i + 1, failing_since=NOW)
        notification = make_notification(hook, job, attempts=3)
        deliver(notification, (False, 500, "HTTP 500", 1.0), (True, 200, "", 0.2))
        Mute.objects.create(job=job, until=NOW + timedelta(hours=1), note="n", created_at=NOW)
    with django_assert_max_num_queries(ALERTS_QUERIES):
        html = alerts(staff_client)
    assert html.count("data-notification=") == 50


def test_the_nav_links_to_the_alerts_page(staff_client):
    html = staff_client.get(reverse("dashboard:overview")).content.decode()
    assert '<a href="/alerts/">Alerts</a>' in html
    assert '<a href="/alerts/" aria-current="page">Alerts</a>' in alerts(staff_client)


def test_the_job_page_shows_the_failure_streak_and_last_success(staff_client, make_job):
    job = make_job("billing-sync")
    JobHealth.objects.create(
        job=job,
        failure_streak=3,
        failing_since=NOW - timedelta(hours=3),
        last_success_at=NOW - timedelta(hours=4),
    )
    html = staff_client.get(reverse("dashboard:job", args=[job.name])).content.decode()
    streak = html.split("data-failure-streak>")[1].split("</dd>")[0]
    assert "3 in a row" in streak
    assert "2026-11-30 09:00:00 UTC" in streak
    assert "2026-11-30 08:00:00 UTC" in html.split("data-last-success>")[1].split("</dd>")[0]


def test_the_job_page_of_a_job_that_never_ran_has_no_streak(staff_client, make_job):
    job = make_job("new")
    html = staff_client.get(reverse("dashboard:job", args=[job.name])).content.decode()
    assert "data-failure-streak>none</dd>" in html
    assert "data-last-success>never</dd>" in html
