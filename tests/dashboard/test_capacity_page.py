"""The Capacity page: per label set, a chart of the runs expected at once
against the runners' slots over the next day, and the quarter hours where
they exceed them, named as "2026-12-01 02:00:00 UTC – 2026-12-01 02:15:00
UTC: 14 slots needed on `linux`, 8 online"."""

import datetime as dt
import re

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from runners.models import Runner

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
URL = reverse("dashboard:capacity")


@pytest.fixture
def nightly_burst(make_job, make_runner):
    """Fourteen reports at 02:00 taking a quarter hour each, eight linux slots."""
    for i in range(14):
        make_job(f"report-{i:02}", schedule="0 2 * * *", labels=["linux"], timeout=900)
    make_job("cleanup", schedule="@hourly", labels=[], timeout=60)
    make_runner("big", labels=["linux", "docker"], capacity=6)
    make_runner("small", labels=["linux"], capacity=2)
    make_runner("away", labels=["linux"], capacity=50, state=Runner.OFFLINE)


def text(html):
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def get(client, at=NOW):
    with time_machine.travel(at, tick=False):
        answer = client.get(URL)
    assert answer.status_code == 200
    return answer.content.decode()


def test_the_page_names_the_quarter_hours_over_capacity(staff_client, nightly_burst):
    page = get(staff_client)
    (span,) = re.findall(r'<li data-span="linux">(.*?)</li>', page)
    assert text(span) == (
        "2026-12-01 02:00:00 UTC – 2026-12-01 02:15:00 UTC: 14 slots needed on linux, 8 online"
    )
    assert '<code class="label-set">linux</code>' in span
    # Shown in the viewer's timezone by dashboard.js, UTC in the title.
    assert (
        '<time datetime="2026-12-01T02:00:00Z" title="2026-12-01 02:00:00 UTC" data-zone="viewer">'
        in span
    )


def test_each_label_set_has_its_chart_with_the_shortage_shaded(staff_client, nightly_burst):
    page = get(staff_client)
    linux = page.split('data-label-set="linux"')[1].split("</section>")[0]
    assert linux.count("data-over") == 1
    assert "peak 14.0 runs at once, 8 slots online" in text(linux)
    assert 'class="demand-line"' in linux and 'class="capacity-line"' in linux
    anywhere = page.split('data-label-set=""')[1].split("</section>")[0]
    assert "any runner" in anywhere and "data-over" not in anywhere
    assert f'href="{URL}" aria-current="page"' in page  # the nav


def test_without_a_shortage_the_page_says_so(staff_client, make_job, make_runner):
    make_job("hourly", schedule="@hourly", labels=["linux"], timeout=60)
    make_runner("one", labels=["linux"], capacity=1)
    page = get(staff_client)
    assert "data-no-shortage" in page and "data-span" not in page


def test_the_forecast_is_read_once_a_minute(staff_client, nightly_burst, make_runner):
    get(staff_client)
    make_runner("extra", labels=["linux"], capacity=20)
    assert "data-span" in get(staff_client, NOW + dt.timedelta(seconds=30))
    assert "data-span" not in get(staff_client, NOW + dt.timedelta(minutes=1))


def test_the_page_needs_both_the_job_and_the_runner_view_permissions(client, db):
    user = get_user_model().objects.create_user("jobs-only", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(user)
    assert client.get(URL).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_runner"))
    user = get_user_model().objects.get(pk=user.pk)  # permissions are cached per instance
    client.force_login(user)
    assert get(client)


def test_each_concurrency_group_shows_its_usage(staff_client, make_job):
    from scheduler.models import ConcurrencyGroup, Execution
    from tests.factories import ExecutionFactory

    group = ConcurrencyGroup.objects.create(name="vendor-api", max_concurrent=2)
    job = make_job("sync", schedule="@hourly", labels=[])
    job.concurrency_group = group
    job.save()
    for minutes, state in ((3, Execution.RUNNING), (2, Execution.RUNNING), (1, Execution.PENDING)):
        at = NOW - dt.timedelta(minutes=minutes)
        ExecutionFactory(job=job, scheduled_for=at, state=state)
    page = get(staff_client)
    row = re.search(r'<tr data-group="vendor-api" class="full">(.*?)</tr>', page, re.S)
    assert row, page
    assert re.search(r"data-running>2<", row.group(1)) and re.search(
        r"data-waiting>1<", row.group(1)
    )


def test_runs_due_at_once_on_one_slot_are_shown_starting_late(staff_client, make_job, make_runner):
    """The average of a quarter hour hides two 44-second runs due at 02:00
    on a one-slot runner: the page shows the peak and the second's delay."""
    for name in ("backup-a", "backup-b"):
        make_job(name, schedule="0 2 * * *", labels=["linux"], timeout=44)
    make_runner("one", labels=["linux"], capacity=1)
    page = get(staff_client)
    assert "data-span" not in page and "data-no-shortage" not in page
    (wait,) = re.findall(r'<li data-wait="linux">(.*?)</li>', page)
    assert text(wait) == (
        "2026-12-01 02:00:00 UTC – 2026-12-01 02:15:00 UTC: 2 runs at once on linux,"
        " 1 slot online: a run starts up to 44.0 s late"
    )
    assert 'data-delay="44.000"' in wait
    linux = page.split('data-label-set="linux"')[1].split("</section>")[0]
    assert "at most 2 at once, a run starts up to 44.0 s late" in text(linux)
    assert "data-at-once-line" in linux
