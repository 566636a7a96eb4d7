"""The dashboard's check pages (docs/design.md §12): the checks with their
state, filterable by state; a check with its recent pings and their logs,
shown safely; the ping URL (a credential) only to users who may change
checks; "Run it in Croniq instead" only to users who may add jobs, opening
the job admin's add form prefilled from the check."""

import datetime as dt
import re
from html import unescape

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from checks import pings, states
from checks.models import Check
from dashboard.check_queries import every_text, shown_body
from tests.checks.factories import CheckFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def user_with(*codenames, name="viewer"):
    user = get_user_model().objects.create_user(name, is_staff=True)
    app_codenames = [codename.split(".") for codename in codenames]
    for app, codename in app_codenames:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return user


VIEWS = ("checks.view_check", "checks.view_ping")


@pytest.fixture
def viewer(client):
    client.force_login(user_with(*VIEWS))
    return client


@pytest.fixture
def changer(client):
    client.force_login(user_with(*VIEWS, "checks.change_check", name="changer"))
    return client


@pytest.fixture
def job_adder(client):
    client.force_login(user_with(*VIEWS, "scheduler.add_job", "scheduler.view_job", name="adder"))
    return client


def ping(check, kind=states.SUCCESS, at=NOW, **fields):
    received = pings.Received(token=check.token, kind=kind, at=at, **fields)
    assert pings.record(received) == pings.FOUND


@pytest.fixture
def world():
    backup = CheckFactory(
        name="backup",
        period=None,
        schedule="30 2 * * *",
        timezone="Europe/Berlin",
        grace=900,
        description="pg_dump on db1",
        labels=["host:db1"],
    )
    heartbeat = CheckFactory(name="heartbeat", period=300, grace=60)
    CheckFactory(name="quiet", period=3600)
    ping(backup, at=NOW - dt.timedelta(hours=7))
    ping(heartbeat, states.START, at=NOW - dt.timedelta(seconds=40))
    ping(heartbeat, states.FAIL, at=NOW - dt.timedelta(seconds=10))
    return {"backup": backup, "heartbeat": heartbeat}


# -- the list ------------------------------------------------------------------------


def test_the_list_shows_each_check_with_its_state_timing_and_deadlines(viewer, world):
    answer = viewer.get(reverse("dashboard:checks"))

    assert answer.status_code == 200
    html = answer.content.decode()
    rows = {
        name: row for name, row in re.findall(r'<tr data-check="([^"]+)">(.*?)</tr>', html, re.S)
    }
    assert list(rows) == ["backup", "heartbeat", "quiet"]
    assert 'class="state state-up">up<' in rows["backup"]
    assert "<code>30 2 * * *</code>" in rows["backup"] and "Europe/Berlin" in rows["backup"]
    assert "<td>15m</td>" in rows["backup"]  # the grace
    assert "2026-12-01 02:30:00 UTC" in rows["backup"]  # last ping
    assert "2026-12-02 01:30:00 UTC" in rows["backup"]  # 02:30 in Berlin, the day after
    assert 'class="state state-down">down<' in rows["heartbeat"]
    assert "every 5m" in rows["heartbeat"]
    assert "new (never pinged)" in rows["quiet"] and "never" in rows["quiet"]
    assert 'href="/checks/backup/"' in rows["backup"]


def test_the_list_filters_by_state_and_counts_each(viewer, world):
    answer = viewer.get(reverse("dashboard:checks"), {"state": "down"})

    html = answer.content.decode()
    assert re.findall(r'<tr data-check="([^"]+)">', html) == ["heartbeat"]
    counts = dict(re.findall(r'data-state-count="(\w+)"[^>]*>\w+ \((\d+)\)', html))
    assert counts == {"new": "1", "up": "1", "late": "0", "down": "1", "paused": "0"}


def test_an_unknown_state_shows_them_all(viewer, world):
    html = viewer.get(reverse("dashboard:checks"), {"state": "bogus"}).content.decode()
    assert len(re.findall(r'<tr data-check="', html)) == 3


def test_the_pages_need_the_view_permissions(client, world):
    client.force_login(user_with("scheduler.view_job", name="jobs-only"))
    assert client.get(reverse("dashboard:checks")).status_code == 403
    client.force_login(user_with("checks.view_check", name="no-pings"))
    assert client.get(reverse("dashboard:checks")).status_code == 200
    assert client.get(reverse("dashboard:check", args=["backup"])).status_code == 403


def test_the_navigation_links_the_checks_page(viewer, world):
    html = viewer.get(reverse("dashboard:checks")).content.decode()
    assert '<a href="/checks/" aria-current="page">Checks</a>' in html


def test_an_unknown_check_is_404(viewer, world):
    assert viewer.get(reverse("dashboard:check", args=["nope"])).status_code == 404


# -- a check and its pings --------------------------------------------------------------


def test_the_check_page_lists_its_pings_newest_first_with_what_each_said(viewer, world):
    heartbeat = world["heartbeat"]
    ping(heartbeat, states.EXIT, exit_status=3, remote_addr="203.0.113.9", body=b"disk full\n")

    html = viewer.get(reverse("dashboard:check", args=["heartbeat"])).content.decode()

    rows = re.findall(r'<tr data-ping="(\d+)">(.*?)</tr>', html, re.S)
    assert [n for n, _ in rows] == ["3", "2", "1"]
    newest = rows[0][1]
    assert 'class="state state-fail">exit status<' in newest and "<td>3</td>" in newest
    assert "203.0.113.9" in newest and "2026-12-01 09:30:00 UTC" in newest
    assert "disk full" in newest
    assert "30.0 s" in rows[1][1]  # the fail ping, 30 s after the start
    assert "every 5m" in html and "1m" in html  # period and grace
    assert "a check keeps its last 100" in html


def test_an_exit_status_of_zero_is_a_success(viewer, world):
    ping(world["heartbeat"], states.EXIT, exit_status=0)
    html = viewer.get(reverse("dashboard:check", args=["heartbeat"])).content.decode()
    assert 'class="state state-success">exit status<' in html


def test_a_log_body_is_escaped_and_bytes_that_are_not_text_show_safely(viewer, world):
    body = b"<script>alert(1)</script>\n\xff\xfe caf\xc3\xa9 \x1b[31mred\x1b[0m\x07\n"
    ping(world["heartbeat"], states.LOG, body=body)

    html = viewer.get(reverse("dashboard:check", args=["heartbeat"])).content.decode()

    assert "<script>alert(1)</script>" not in html
    [shown] = re.findall(r"<pre class=\"log\" data-ping-body>(.*?)</pre>", html, re.S)
    assert unescape(shown) == (
        "<script>alert(1)</script>\n\ufffd\ufffd café \\x1b[31mred\\x1b[0m\\x07\n"
    )
    assert "\x1b" not in html and "\x07" not in html


def test_a_cut_body_says_so(viewer, world):
    ping(world["heartbeat"], states.LOG, body=b"x" * (100 * 1024 + 10))
    html = viewer.get(reverse("dashboard:check", args=["heartbeat"])).content.decode()
    assert "102400 characters, cut at 100 KB" in html


def test_shown_body_keeps_tabs_and_newlines_and_escapes_other_controls():
    assert shown_body("a\tb\nc\rd\x00e\x7f\x85") == "a\tb\nc\\x0dd\\x00e\\x7f\\x85"


def test_pings_are_paged(viewer, world):
    quiet = Check.objects.get(name="quiet")
    for second in range(55):
        ping(quiet, states.LOG, at=NOW - dt.timedelta(seconds=second))

    first = viewer.get(reverse("dashboard:check", args=["quiet"])).content.decode()
    second = viewer.get(reverse("dashboard:check", args=["quiet"]), {"page": 2}).content.decode()

    assert len(re.findall(r"<tr data-ping=", first)) == 50 and 'rel="next"' in first
    assert len(re.findall(r"<tr data-ping=", second)) == 5


# -- the ping URL, a credential ---------------------------------------------------------


def test_a_viewer_never_sees_the_ping_url(viewer, world):
    for name in ("backup", "heartbeat"):
        html = viewer.get(reverse("dashboard:check", args=[name])).content.decode()
        assert world[name].token not in html and "data-ping-url" not in html
    listing = viewer.get(reverse("dashboard:checks")).content.decode()
    assert world["backup"].token not in listing


def test_a_user_who_may_change_checks_sees_it(changer, world, settings):
    settings.CRONIQ_PUBLIC_URL = "https://croniq.example.com"
    html = changer.get(reverse("dashboard:check", args=["backup"])).content.decode()
    assert f"https://croniq.example.com/ping/{world['backup'].token}" in html


# -- from check to job ------------------------------------------------------------------


def run_in_croniq(html):
    found = re.findall(r'<a class="button" href="([^"]+)" data-run-in-croniq>', html)
    return unescape(found[0]) if found else None


def test_the_offer_shows_only_to_users_who_may_add_jobs(client, world):
    page = reverse("dashboard:check", args=["backup"])
    client.force_login(user_with(*VIEWS, "scheduler.change_job"))
    assert run_in_croniq(client.get(page).content.decode()) is None
    client.force_login(user_with(*VIEWS, "scheduler.add_job", name="adder"))
    assert run_in_croniq(client.get(page).content.decode()) is not None


def test_the_offer_links_the_job_add_form_prefilled_from_the_check(job_adder, world):
    html = job_adder.get(reverse("dashboard:check", args=["backup"])).content.decode()
    assert run_in_croniq(html) == (
        "/admin/scheduler/job/add/?name=backup&schedule=30+2+%2A+%2A+%2A"
        "&timezone=Europe%2FBerlin&description=pg_dump+on+db1"
    )


def input_value(html, name):
    match = re.search(rf'<(?:input|textarea)[^>]*name="{name}"[^>]*>', html)
    assert match, name
    tag = match.group(0)
    if tag.startswith("<textarea"):
        return unescape(re.search(rf"{re.escape(tag)}\n?(.*?)</textarea>", html, re.S).group(1))
    value = re.search(r'value="([^"]*)"', tag)
    return unescape(value.group(1)) if value else ""


@pytest.mark.parametrize(
    ("check", "schedule", "timezone", "description"),
    [
        ("backup", "30 2 * * *", "Europe/Berlin", "pg_dump on db1"),
        ("heartbeat", "@every 5m", "UTC", ""),
    ],
)
def test_the_add_form_shows_the_checks_values(
    job_adder, world, check, schedule, timezone, description
):
    link = run_in_croniq(job_adder.get(reverse("dashboard:check", args=[check])).content.decode())

    answer = job_adder.get(link)

    assert answer.status_code == 200
    html = answer.content.decode()
    assert input_value(html, "name") == check
    assert input_value(html, "schedule") == schedule
    assert input_value(html, "timezone") == timezone
    assert input_value(html, "description") == description


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1, "1s"), (90, "1m30s"), (300, "5m"), (3600, "1h"), (5400, "1h30m"), (86400 + 61, "1d1m1s")],
)
def test_a_period_reads_in_the_every_grammar_and_back(seconds, text):
    from scheduler.apply.items import seconds as read_seconds

    assert every_text(seconds) == text
    assert read_seconds("period", text) == seconds
