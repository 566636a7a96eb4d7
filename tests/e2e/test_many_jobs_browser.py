"""Many jobs in headless Chromium against a real uvicorn (the set-up of
tests/e2e/test_browser.py): the overview's filters kept in the URL, a bulk
pause asked for and confirmed, the keyboard palette (Ctrl+K, "/"), and the
project filter as a member of two projects sees it. Screenshots land in
test-artifacts/screenshots/."""

import re

import pytest

from tests.e2e import test_browser as browser
from tests.e2e.test_browser import django_shell, screenshot

pytestmark = pytest.mark.e2e

# The headless Chromium and the real uvicorn of the dashboard's browser test.
chromium = browser.chromium
server = browser.server

OPERATOR = ("operator", "croniq-operator-pw")

WORLD = """
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone
from runners.models import Runner
from scheduler.models import Job

now = timezone.now()
get_user_model().objects.create_user({name!r}, password={password!r}, is_staff=True).groups.add(
    Group.objects.get(name="Croniq operators")
)
for name, tags, owner in (
    ("invoice-run", ["billing", "nightly"], "team-money"),
    ("refund-sweep", ["billing"], "team-money"),
    ("ledger-close", ["billing"], "team-money"),
    ("db-backup", ["nightly"], "team-ops"),
    ("log-rotate", [], "team-ops"),
):
    Job.objects.create(
        name=name, schedule="30 2 * * *", command="true", tags=tags, owner=owner,
        next_run_at=now + timedelta(hours=3),
    )
Runner.objects.create(name="web-1", labels=[], session="s", registered_at=now, last_seen_at=now)
out(True)
"""


@pytest.fixture
def world(server, e2e_database):
    name, password = OPERATOR
    django_shell(e2e_database, WORLD.format(name=name, password=password))
    return server


@pytest.fixture
def page(chromium, world):
    context = chromium.new_context(locale="en-GB", viewport={"width": 1360, "height": 900})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"))
    page.problems = problems
    yield page
    context.close()


def log_in(page, server, person=OPERATOR):
    name, password = person
    page.goto(server.url + "/")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", password)
    page.click("input[type=submit]")
    page.wait_for_url(server.url + "/")


def rows(page):
    return [row.get_attribute("data-job") for row in page.locator("tr[data-job]").all()]


def test_the_filters_are_kept_in_the_url(page, world):
    log_in(page, world)
    page.fill("form.job-filters input[name=tag]", "billing")
    page.select_option("form.job-filters select[name=state]", "active")
    page.click("form.job-filters button[type=submit]")
    page.wait_for_url(re.compile(r"/\?.*tag=billing"))
    assert "tag=billing" in page.url and "state=active" in page.url
    assert rows(page) == ["invoice-run", "ledger-close", "refund-sweep"]
    screenshot(page, "overview-filtered")

    # The URL alone brings the same list back, and its links keep the filter.
    page.goto(page.url)
    assert rows(page) == ["invoice-run", "ledger-close", "refund-sweep"]
    assert page.input_value("form.job-filters input[name=tag]") == "billing"
    page.click("tr[data-job=invoice-run] a[data-owner]")
    page.wait_for_url(re.compile(r"owner=team-money"))
    assert rows(page) == ["invoice-run", "ledger-close", "refund-sweep"]
    page.click("tr[data-job=invoice-run] a[data-tag]:has-text('nightly')")
    page.wait_for_url(re.compile(r"tag=nightly"))
    assert "owner=team-money" in page.url
    assert rows(page) == ["invoice-run"]
    page.click("[data-clear-filters]")
    page.wait_for_url(world.url + "/")
    assert len(rows(page)) == 5
    assert page.problems == []


def test_a_bulk_pause_asks_first_naming_how_many(page, world):
    log_in(page, world)
    page.goto(world.url + "/?tag=billing")
    page.check("tr[data-job=invoice-run] input[name=job]")
    page.check("tr[data-job=ledger-close] input[name=job]")
    assert page.inner_text("[data-ticked-count]") == "2 ticked"
    page.click("button[data-bulk][data-action='job.pause']")
    page.wait_for_selector("[data-bulk-question]")
    assert page.inner_text("[data-bulk-question]") == "Pause 2 jobs?"
    assert page.locator("[data-bulk-jobs] li").all_inner_texts() == ["invoice-run", "ledger-close"]
    page.fill("input[data-reason-for='job.pause']", "month-end freeze")
    screenshot(page, "bulk-pause-confirmation")
    page.click("button[data-bulk-confirm]")
    page.wait_for_selector("ul.messages li.success")
    assert page.inner_text("ul.messages li") == "Paused 2 of 2 job(s): month-end freeze."
    assert "tag=billing" in page.url
    paused = page.locator("tr[data-job] .badge:has-text('paused')")
    assert paused.count() == 2
    screenshot(page, "bulk-pause-done")

    # All the jobs the filter matches, this time: the paused ones resume.
    page.goto(world.url + "/?tag=billing&state=paused")
    page.check("form#bulk input[name=scope][value=filter]")
    page.click("button[data-bulk][data-action='job.resume']")
    page.wait_for_selector("[data-bulk-question]")
    assert page.inner_text("[data-bulk-question]") == "Resume 2 jobs?"
    page.click("button[data-bulk-confirm]")
    page.wait_for_selector("ul.messages li.success")
    assert page.inner_text("ul.messages li") == "Resumed 2 of 2 job(s)."
    assert rows(page) == []  # none is paused any more

    page.goto(world.url + "/audit/?actor=operator")
    actions = page.locator("table.audit tbody td:nth-child(2)").all_inner_texts()
    assert sorted(actions) == ["job.paused", "job.paused", "job.resumed", "job.resumed"]
    assert page.problems == []


def test_a_key_pressed_as_the_palette_closes_reaches_the_page_not_the_hidden_input(page, world):
    # One task, no style update between: closing must move the focus itself,
    # or a "/" pressed straight after Escape lands on the hidden input and
    # the palette does not open again.
    log_in(page, world)
    page.click("h1")
    reopened = page.evaluate(
        """() => {
        const key = (name) =>
            new KeyboardEvent("keydown", {key: name, bubbles: true, cancelable: true});
        window.CroniqPalette.open();
        const input = document.querySelector(".palette input");
        input.dispatchEvent(key("Escape"));
        const closed = document.querySelector(".palette").hidden;
        const target = document.activeElement;
        target.dispatchEvent(key("/"));
        return [closed, target.tagName, !document.querySelector(".palette").hidden];
    }"""
    )
    assert reopened == [True, "BODY", True]
    assert page.problems == []


def test_the_palette_jumps_to_a_job_a_runner_or_a_page(page, world):
    log_in(page, world)
    palette = page.locator(".palette")
    page.keyboard.press("Control+k")
    palette.wait_for(state="visible")
    page.keyboard.type("nightly")
    # Jobs tagged nightly, by name; Enter jumps to the first.
    page.wait_for_selector(".palette li[data-kind=job]")
    names = page.locator(".palette li .name").all_inner_texts()
    assert names == ["db-backup", "invoice-run"]
    screenshot(page, "palette")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_url(world.url + "/jobs/invoice-run/")

    # "/" opens it too, but not while typing in a field; Escape closes it.
    page.goto(world.url + "/")
    page.focus("form.job-filters input[name=q]")
    page.keyboard.type("/")
    assert page.input_value("form.job-filters input[name=q]") == "/"
    assert not palette.is_visible()
    page.click("h1")
    page.keyboard.press("/")
    palette.wait_for(state="visible")
    page.keyboard.press("Escape")
    palette.wait_for(state="hidden")

    page.keyboard.press("/")
    palette.wait_for(state="visible")
    page.keyboard.type("web")
    page.wait_for_selector(".palette li[data-kind=runner]")
    page.keyboard.press("Enter")
    page.wait_for_url(world.url + "/runners/#runner-web-1")
    assert page.locator("td#runner-web-1").count() == 1

    page.keyboard.press("Control+k")
    page.keyboard.type("dead")
    page.wait_for_selector(".palette li[data-kind=page]")
    page.keyboard.press("Enter")
    page.wait_for_url(world.url + "/dead-letters/")
    assert page.problems == []


MEMBER = ("mira", "croniq-member-pw")

PROJECTS = """
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from projects.models import Project, Role
from scheduler.models import Job

now = timezone.now()
mira = get_user_model().objects.create_user({name!r}, password={password!r}, is_staff=True)
for project, role in (("payments", "operator"), ("search", "viewer"), ("secret-lab", None)):
    where = Project.objects.create(name=project)
    if role:
        Role.objects.create(project=where, user=mira, role=role)
for name, project in (
    ("charge-cards", "payments"),
    ("settle-payouts", "payments"),
    ("reindex", "search"),
    ("train-model", "secret-lab"),
):
    Job.objects.create(
        name=name, schedule="0 4 * * *", command="true", project=project,
        next_run_at=now + timedelta(hours=3),
    )
out(True)
"""


def test_a_member_picks_one_of_its_projects_in_the_filter(page, world, e2e_database):
    django_shell(e2e_database, PROJECTS.format(name=MEMBER[0], password=MEMBER[1]))
    log_in(page, world, MEMBER)
    # Its two projects' jobs; neither the default project's nor another's.
    assert rows(page) == ["charge-cards", "reindex", "settle-payouts"]
    choices = page.locator("form.job-filters select[name=project] option")
    assert choices.all_inner_texts() == ["any", "payments", "search"]

    page.select_option("form.job-filters select[name=project]", "payments")
    page.click("form.job-filters button[type=submit]")
    page.wait_for_url(re.compile(r"/\?.*project=payments"))
    assert rows(page) == ["charge-cards", "settle-payouts"]
    badges = page.locator("tr[data-job] a[data-project]").all_inner_texts()
    assert badges == ["payments", "payments"]
    screenshot(page, "project-filter")

    # A job of a project it has no role in is not there to open.
    answer = page.goto(world.url + "/jobs/train-model/")
    assert answer.status == 404
    page.problems.remove(f"404 {world.url}/jobs/train-model/")
    assert page.problems == []
