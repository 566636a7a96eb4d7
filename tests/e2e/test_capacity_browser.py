"""The Capacity page in headless Chromium against a real uvicorn (the set-up
of tests/e2e/test_browser.py): two 44-second jobs due every hour on the one
slot of the only linux runner. The quarter hour's average stays far below
one run, yet the page names the quarter hours where the second run starts
44 s late and the chart's most-at-once line. The screenshot lands in
test-artifacts/screenshots/."""

import pytest

from tests.e2e import test_browser as browser
from tests.e2e.test_browser import PASSWORD, USERNAME, django_shell, log_in, screenshot

pytestmark = pytest.mark.e2e

chromium = browser.chromium
server = browser.server

WORLD = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone
from runners.models import Runner
from scheduler.models import Job

now = timezone.now()
viewer = get_user_model().objects.create_user({username!r}, password={password!r}, is_staff=True)
viewer.groups.add(Group.objects.get(name="Croniq viewers"))
for name in ("backup-a", "backup-b"):
    Job.objects.create(
        name=name, schedule="0 * * * *", command="sh backup.sh", labels=["linux"],
        timeout=44, next_run_at=now,
    )
Runner.objects.create(
    name="one-slot", labels=["linux"], capacity=1, session="s", registered_at=now,
    last_seen_at=now,
)
out({{}})
"""


@pytest.fixture
def page(chromium, server, e2e_database):
    django_shell(e2e_database, WORLD.format(username=USERNAME, password=PASSWORD))
    context = chromium.new_context(locale="en-GB", viewport={"width": 1360, "height": 900})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"))
    page.problems = problems
    yield page
    context.close()


def test_the_capacity_page_shows_the_peak_and_the_start_delay(page, server):
    log_in(page, server)
    page.goto(server.url + "/capacity/")
    waits = page.locator('li[data-wait="linux"]')
    waits.first.wait_for()
    assert waits.count() >= 23  # every hour of the next day
    first = waits.first.inner_text()
    assert "2 runs at once on linux, 1 slot online: a run starts up to 44.0 s late" in first
    chart = page.locator('section[data-label-set="linux"]')
    assert "at most 2 at once" in chart.locator("[data-peak-at-once]").inner_text()
    assert "44.0 s late" in chart.locator("[data-longest-delay]").inner_text()
    assert chart.locator("[data-at-once-line]").count() == 1
    assert page.locator("[data-no-shortage]").count() == 0
    screenshot(page, "capacity-start-delay")
    assert page.problems == []
