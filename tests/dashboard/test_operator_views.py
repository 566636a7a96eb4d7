"""What the operator sees first: why pending work waits, the job list's
filters behind the overview's counters, and runners that have gone quiet."""

import re
from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse

from scheduler.models import Execution, JobHealth

from .conftest import NOW

GPU_WHY = "no runner with labels gpu has been seen; 1 runner online: linux"


@pytest.fixture
def at_now():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def gpu_waits(make_job, make_execution, make_runner):
    """A gpu job with a run waiting; the one runner online carries linux only."""
    make_runner("web-1", labels=["linux"])
    job = make_job("train", labels=["gpu"])
    run = make_execution(job, NOW - timedelta(minutes=2), state=Execution.PENDING)
    return job, run


def html_of(client, url, **params):
    return client.get(url, params).content.decode()


def pending_why(html):
    found = re.findall(r"<[^>]*data-pending-why[^>]*>(.*?)</(?:p|div)>", html, re.S)
    return [re.sub(r"<[^>]+>", "", text) for text in found]


def test_a_waiting_runs_page_says_why(staff_client, gpu_waits, at_now):
    _, run = gpu_waits
    html = html_of(staff_client, reverse("dashboard:execution", args=[run.pk]))
    assert pending_why(html) == [f"Waiting for a runner: {GPU_WHY}"]


def test_the_job_page_and_the_job_list_say_why_too(staff_client, gpu_waits, at_now):
    job, _ = gpu_waits
    html = html_of(staff_client, reverse("dashboard:job", args=[job.name]))
    assert pending_why(html) == [f"1 run waiting since 2026-11-30 11:58:00 UTC: {GPU_WHY}"]
    html = html_of(staff_client, reverse("dashboard:overview"))
    assert pending_why(html) == [f"1 waiting: {GPU_WHY}"]
    assert 'class="waiting waiting-unknown' in html


def test_a_run_that_is_not_pending_says_nothing_about_runners(
    staff_client, make_job, make_execution, at_now
):
    run = make_execution(make_job(labels=["gpu"]), state=Execution.FAILED)
    assert pending_why(html_of(staff_client, reverse("dashboard:execution", args=[run.pk]))) == []


@pytest.fixture
def three_kinds(make_job, make_execution, gpu_waits):
    failing = make_job("failing")
    JobHealth.objects.create(job=failing, failure_streak=2, failing_since=NOW)
    make_job("paused", paused_at=NOW, pause_reason="disk full")
    later = make_job("later")  # a retry not due yet waits for its time, not a runner
    make_execution(later, NOW, run_after=NOW + timedelta(minutes=5), state=Execution.PENDING)
    make_job("fine")


@pytest.mark.parametrize(
    ("show", "names"),
    [
        ("", ["failing", "fine", "later", "paused", "train"]),
        ("failing", ["failing"]),
        ("paused", ["paused"]),
        ("waiting", ["train"]),
        ("bogus", ["failing", "fine", "later", "paused", "train"]),
    ],
)
def test_the_job_list_filters(staff_client, three_kinds, at_now, show, names):
    html = html_of(staff_client, reverse("dashboard:overview"), show=show)
    assert re.findall(r'<tr data-job="([^"]+)"', html) == names


def test_a_filter_combines_with_the_search_and_keeps_it_in_its_links(
    staff_client, three_kinds, at_now
):
    html = html_of(staff_client, reverse("dashboard:overview"), state="failing", q="pause")
    assert re.findall(r'<tr data-job="([^"]+)"', html) == []
    assert "No job whose name contains “pause” is failing (a failure streak)." in html
    assert '<option value="failing" selected>' in html
    assert 'name="q" value="pause"' in html
    assert 'href="?q=pause&amp;state=paused"' in html


def test_the_overviews_counters_link_to_the_filtered_lists(staff_client, three_kinds, at_now):
    html = html_of(staff_client, reverse("dashboard:overview"))

    def card(marker):
        found = re.search(
            marker + r'.*?<div class="count">([^<]*)</div>\s*<div class="label"><a href="([^"]+)"',
            html,
            re.S,
        )
        return found.group(1), found.group(2)

    runners = reverse("dashboard:runners")
    assert card('data-job-filter="failing"') == ("1", "?state=failing")
    assert card('data-job-filter="paused"') == ("1", "?state=paused")
    assert card('data-job-filter="waiting"') == ("1", "?state=waiting")
    assert card('data-state="pending"') == ("2", "?state=waiting")
    assert card('data-state="failed"')[1] == "?state=failing"
    assert card('data-metric="runners-online"') == ("1", f"{runners}?state=online")
    assert card('data-metric="runners-offline"') == ("0", f"{runners}?state=offline")
    assert card('data-metric="runners-draining"')[1] == f"{runners}?state=draining"
    assert card('data-metric="runners-flapping"')[1] == f"{runners}?state=flapping"


def runner_rows(html):
    return re.findall(r'<tr data-runner="([^"]+)"', html)


def test_the_runners_page_filters_by_state(staff_client, make_runner):
    online = make_runner("a", state="online")
    make_runner("b", state="offline")
    make_runner("c", state="draining", drained=True, flapping=True, flapping_since=NOW)
    url = reverse("dashboard:runners")
    assert runner_rows(html_of(staff_client, url)) == ["a", "b", "c"]
    assert runner_rows(html_of(staff_client, url, state="offline")) == ["b"]
    assert runner_rows(html_of(staff_client, url, state="flapping")) == ["c"]
    assert runner_rows(html_of(staff_client, url, state="nonsense")) == ["a", "b", "c"]
    online.delete()
    assert "No runner is online." in html_of(staff_client, url, state="online")


def runner_row(html, name):
    return re.search(rf'<tr data-runner="{name}"[^>]*>.*?</tr>', html, re.S).group(0)


def cell_text(html):
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


@pytest.fixture
def runners_by_liveness(make_runner, settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 10.0
    make_runner("fresh", last_seen_at=NOW - timedelta(seconds=3))
    make_runner("quiet", last_seen_at=NOW - timedelta(seconds=17))
    make_runner("silent", last_seen_at=NOW - timedelta(seconds=24))
    make_runner("overdue", last_seen_at=NOW - timedelta(seconds=45), state="draining", drained=True)
    make_runner("gone", last_seen_at=NOW - timedelta(minutes=5), state="offline")


def test_runners_show_how_long_ago_they_were_seen_and_a_silent_one_says_silent(
    staff_client, runners_by_liveness
):
    with time_machine.travel(NOW, tick=False):
        html = html_of(staff_client, reverse("dashboard:runners"))

    def seen(name):
        row = runner_row(html, name)
        return re.search(r'<td class="seen ([^"]+)"[^>]*>(.*?)</td>', row, re.S).groups()

    def state(name):
        row = runner_row(html, name)
        return cell_text(re.search(r"<td data-runner-state>(.*?)</td>", row, re.S).group(1))

    assert [seen(name)[0] for name in ("fresh", "quiet", "silent", "overdue", "gone")] == [
        "seen-fresh", "seen-quiet", "seen-silent", "seen-silent", "seen-offline",
    ]  # fmt: skip
    assert cell_text(seen("quiet")[1]) == "last seen 17 s ago"
    assert cell_text(seen("silent")[1]) == "last seen 24 s ago"
    assert "<time" in seen("gone")[1]
    # A heartbeat late is a colour; silent is the row's state until the
    # loop marks the runner offline.
    assert [state(name) for name in ("fresh", "quiet", "silent", "overdue", "gone")] == [
        "online", "online", "silent", "silent draining", "offline",
    ]  # fmt: skip
    assert 'data-runner="silent" data-state="silent"' in html
    assert "one not heard from for 20 s is silent, and after 30 s it is marked offline" in html


def test_the_runners_rows_the_page_polls_are_the_rows_it_shows(staff_client, runners_by_liveness):
    with time_machine.travel(NOW, tick=False):
        page = html_of(staff_client, reverse("dashboard:runners"), state="online")
        answer = staff_client.get(reverse("dashboard:runners-rows"), {"state": "online"})
    assert answer.status_code == 200
    rows = answer.json()["html"]
    shown = re.search(r"<tbody data-runner-rows>(.*?)</tbody>", page, re.S).group(1)
    assert rows == shown
    assert runner_rows(rows) == ["fresh", "quiet", "silent"]
    assert 'data-rows-url="/runners/rows?state=online"' in page

    # Later, by the server's clock: the quiet one has gone silent too.
    with time_machine.travel(NOW + timedelta(seconds=4), tick=False):
        rows = staff_client.get(reverse("dashboard:runners-rows"), {"state": "online"}).json()
    assert 'data-runner="quiet" data-state="silent"' in rows["html"]


def test_the_runners_rows_need_the_runners_view_permission(client, make_runner, db):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_user("x", password="pw", is_staff=True))
    assert client.get(reverse("dashboard:runners-rows")).status_code == 403


def test_a_run_only_older_agents_could_take_says_they_need_upgrading(
    staff_client, make_job, make_execution, make_runner, at_now
):
    make_runner("web-1", labels=["linux"], version="0.2.0")
    job = make_job("fed", labels=["linux"], stdin="input\n")
    run = make_execution(job, NOW - timedelta(minutes=2), state=Execution.PENDING)
    why = (
        "the job needs stdin, which the agents of the runners with labels linux do not "
        "support: web-1 (0.2.0); upgrade croniq-runner"
    )
    html = html_of(staff_client, reverse("dashboard:execution", args=[run.pk]))
    assert pending_why(html) == [f"Waiting for a runner: {why}"]
    html = html_of(staff_client, reverse("dashboard:overview"))
    assert pending_why(html) == [f"1 waiting: {why}"]
