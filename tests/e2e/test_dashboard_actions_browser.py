"""The operator's day in headless Chromium against a real uvicorn: acting
from the dashboard, seeing why work waits, and a runner going quiet.

Same browser setup as test_browser.py (system Chromium through playwright;
skipped outside CI when either is missing). Screenshots land in
test-artifacts/screenshots/.
"""

import re

import pytest

from tests.e2e.test_browser import chromium, django_shell, screenshot  # noqa: F401 (a fixture)

pytestmark = pytest.mark.e2e

OPERATOR = ("operator", "croniq-operator-pw")
VIEWER = ("viewer", "croniq-viewer-pw")

WORLD = """
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone
from runners.models import Runner
from scheduler.models import Job

now = timezone.now()
users = get_user_model().objects
for (name, password), group in (({operator!r}, "Croniq operators"), ({viewer!r}, "Croniq viewers")):
    users.create_user(name, password=password, is_staff=True).groups.add(
        Group.objects.get(name=group)
    )
Job.objects.create(
    name="nightly-report", schedule="30 2 * * *", command="python report.py",
    labels=["linux"], next_run_at=now + timedelta(hours=3),
)
Job.objects.create(
    name="train-model", schedule="0 3 * * *", command="python train.py",
    labels=["gpu"], next_run_at=now + timedelta(hours=4),
)
Runner.objects.create(
    name="web-1", labels=["linux"], session="s", registered_at=now, last_seen_at=now,
)
out(True)
"""


@pytest.fixture
def world(server, e2e_database):
    django_shell(e2e_database, WORLD.format(operator=OPERATOR, viewer=VIEWER))
    return server


@pytest.fixture
def browser_page(chromium, world):  # noqa: F811 (the imported fixture)
    context = chromium.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"))
    page.problems = problems
    yield page
    context.close()


def log_in(page, server, user):
    name, password = user
    page.goto(server.url + "/")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", password)
    page.click("input[type=submit]")
    page.wait_for_url(server.url + "/")


def answer_confirms(page, answers):
    """Accept or dismiss the confirmation dialogs in turn; returns their texts."""
    asked = []

    def handle(dialog):
        asked.append(dialog.message)
        dialog.accept() if answers[len(asked) - 1] else dialog.dismiss()

    page.on("dialog", handle)
    return asked


def test_an_operator_runs_a_job_now_and_pauses_it_with_a_reason(browser_page, world):
    page = browser_page
    log_in(page, world, OPERATOR)
    page.goto(world.url + "/jobs/nightly-report/")
    asked = answer_confirms(page, [False, True, True])

    # Dismissing the confirmation posts nothing.
    page.click("button[data-action='job.run']")
    page.wait_for_timeout(300)
    assert page.locator("ul.messages").count() == 0

    page.click("button[data-action='job.run']")
    page.wait_for_selector("ul.messages li.success")
    assert re.fullmatch(r"Run \d+ of nightly-report started\.", page.inner_text("ul.messages li"))
    assert "nightly-report" in asked[0]

    page.fill("input[data-reason-for='job.pause']", "reports disk is full")
    page.click("button[data-action='job.pause']")
    page.wait_for_selector("button[data-action='job.resume']")
    assert page.inner_text("ul.messages li") == "nightly-report paused: reports disk is full"
    assert "reports disk is full" in page.inner_text("[data-pause-reason]")
    assert len(asked) == 3 and asked[2].startswith("Pause nightly-report?")
    screenshot(page, "dashboard-actions-operator")

    # The audit trail names the operator for both.
    page.goto(world.url + "/audit/?actor=operator")
    actions = page.locator("table.audit tbody td:nth-child(2)").all_inner_texts()
    assert actions == ["job.paused", "job.run_now"]
    assert page.problems == []


def test_a_viewer_sees_no_buttons(browser_page, world):
    page = browser_page
    log_in(page, world, VIEWER)
    page.goto(world.url + "/jobs/nightly-report/")
    assert page.locator("h1").inner_text().startswith("nightly-report")
    assert page.locator("[data-action]").count() == 0
    page.goto(world.url + "/runners/")
    assert page.locator("tr[data-runner=web-1]").count() == 1
    assert page.locator("[data-action]").count() == 0
    screenshot(page, "dashboard-actions-viewer")
    assert page.problems == []


def test_a_run_no_runner_can_take_says_why_it_waits(browser_page, world):
    page = browser_page
    log_in(page, world, OPERATOR)
    page.goto(world.url + "/jobs/train-model/")
    answer_confirms(page, [True])
    page.click("button[data-action='job.run']")
    page.wait_for_selector("[data-pending-why]")
    why = "no runner with labels gpu has been seen; 1 runner online: linux"
    assert page.inner_text("[data-pending-why]").endswith(why)
    screenshot(page, "pending-why-job")

    page.goto(world.url + "/?state=waiting")
    # The row's first cell is the operator's tick box, with no text.
    assert page.locator("tr[data-job]").all_inner_texts()[0].strip().startswith("train-model")
    assert page.locator("tr[data-job]").count() == 1
    assert page.inner_text("tr[data-job=train-model] [data-pending-why]") == f"1 waiting: {why}"
    screenshot(page, "pending-why-overview")
    assert page.problems == []


def test_a_runner_that_goes_quiet_turns_yellow_then_silent_then_offline_without_a_reload(
    browser_page, world, e2e_database
):
    page = browser_page
    log_in(page, world, OPERATOR)
    # Its last heartbeat was 14 s ago (the interval is 10 s); no loop runs,
    # so nobody marks it offline but this test.
    django_shell(
        e2e_database,
        """
        from datetime import timedelta
        from django.utils import timezone
        from runners.models import Runner
        seen = timezone.now() - timedelta(seconds=14)
        out(Runner.objects.filter(name="web-1").update(last_seen_at=seen))
        """,
    )
    page.goto(world.url + "/runners/")
    row = page.locator("tr[data-runner=web-1]")
    seen = row.locator("td.seen")
    assert re.fullmatch(r"last seen 1\d s ago", seen.inner_text())
    assert row.locator("[data-runner-state]").inner_text() == "online"
    # The page asks for its rows every 2 s: past 15 s the cell turns yellow
    # (a heartbeat late), the state still online ...
    page.wait_for_selector("tr[data-runner=web-1] td.seen.seen-quiet", timeout=30_000)
    assert seen.evaluate("el => getComputedStyle(el).color") == "rgb(224, 138, 30)"  # --warn
    assert row.locator("[data-runner-state]").inner_text() == "online"
    screenshot(page, "runners-quiet")
    # ... and past 20 s the row says silent, in red.
    page.wait_for_selector("tr[data-runner=web-1][data-state=silent]", timeout=30_000)
    assert row.locator("[data-runner-state]").inner_text() == "silent"
    assert re.fullmatch(r"last seen 2\d s ago", seen.inner_text())
    assert seen.evaluate("el => getComputedStyle(el).color") == "rgb(214, 69, 69)"  # --fail
    # Still online as far as the loop knows: draining it applies (an
    # operator may drain; forgetting is an administrator's).
    actions = "els => els.map(e => e.dataset.action)"
    assert row.locator("[data-action]").evaluate_all(actions) == ["runner.drain"]
    screenshot(page, "runners-silent")

    # The loop's step marks it offline: the row follows, and Drain, which
    # no longer applies, is gone.
    django_shell(
        e2e_database,
        """
        from runners.models import Runner
        out(Runner.objects.filter(name="web-1").update(state="offline"))
        """,
    )
    page.wait_for_selector("tr[data-runner=web-1][data-state=offline]", timeout=30_000)
    assert row.locator("[data-runner-state]").inner_text() == "offline"
    assert row.locator("[data-action]").evaluate_all(actions) == []
    screenshot(page, "runners-offline")
    assert page.problems == []
