"""The job page's duration chart with 1,000 runs, and the overview's failure
heat-map, in headless Chromium against a real uvicorn (the set-up of
tests/e2e/test_browser.py). Screenshots land in test-artifacts/screenshots/."""

import re

import pytest

from dashboard.charts import LEFT, RIGHT, WIDTH
from tests.e2e import test_browser as browser
from tests.e2e.test_browser import PASSWORD, USERNAME, django_shell, log_in, screenshot

pytestmark = pytest.mark.e2e

# The headless Chromium and the real uvicorn of the dashboard's browser test.
chromium = browser.chromium
server = browser.server

RUNS = 1_000

# One run a minute for 1,000 minutes, inserted directly; every tenth failed.
# "flaky" failed twice in the last hour, and succeeded once.
WORLD = """
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone
from scheduler.models import Execution, Job

now = timezone.now().replace(second=0, microsecond=0)
viewer = get_user_model().objects.create_user({username!r}, password={password!r}, is_staff=True)
viewer.groups.add(Group.objects.get(name="Croniq viewers"))
busy = Job.objects.create(name="busy", schedule="* * * * *", command="true")
flaky = Job.objects.create(name="flaky", schedule="*/20 * * * *", command="false")
def run(job, minutes, state, seconds):
    at = now - timedelta(minutes=minutes)
    return Execution(
        job=job, scheduled_for=at, run_after=at, created_at=at, state=state,
        claimed_at=at, finished_at=at + timedelta(seconds=seconds),
    )
Execution.objects.bulk_create(
    [run(busy, i + 1, "failed" if i % 10 == 0 else "succeeded", 5 + i % 50) for i in range({runs})]
    + [run(flaky, m, s, 3) for m, s in ((10, "failed"), (30, "failed"), (50, "succeeded"))],
    batch_size=500,
)
oldest = Execution.objects.filter(job=busy).order_by("scheduled_for").first()
out({{"oldest": oldest.pk}})
"""


@pytest.fixture
def world(server, e2e_database):
    ids = django_shell(e2e_database, WORLD.format(username=USERNAME, password=PASSWORD, runs=RUNS))
    return {"server": server, **ids}


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


def test_the_job_page_draws_a_thousand_runs_on_a_time_axis(page, world):
    log_in(page, world["server"])
    page.goto(world["server"].url + "/jobs/busy/")

    chart = page.locator("svg.duration-chart")
    assert chart.locator(".point").count() == RUNS
    assert chart.locator(".point[data-failed]").count() == RUNS // 10
    # The oldest run starts the axis, at its left end.
    oldest = chart.locator(f'a[data-run="{world["oldest"]}"] circle')
    assert float(oldest.get_attribute("cx")) == LEFT
    assert all(
        LEFT <= float(x) <= WIDTH - RIGHT
        for x in chart.locator("circle.point").evaluate_all(
            "els => els.map(e => e.getAttribute('cx'))"
        )
    )
    # Drawn inside the chart's box, with dated ticks along the time axis.
    box, point = chart.bounding_box(), oldest.bounding_box()
    assert box["x"] <= point["x"] <= box["x"] + box["width"]
    assert box["y"] <= point["y"] <= box["y"] + box["height"]
    assert chart.locator("[data-time-tick]").count() >= 3
    # An axis label is an instant as every page writes one: ISO date, 24-hour clock.
    assert re.fullmatch(
        r"\d{4}-\d{2}-\d{2}( \d{2}:\d{2})?", chart.locator("[data-time-tick]").first.text_content()
    )

    week = page.locator("[data-run-stats] tr[data-window='7']")
    assert week.locator("[data-success-rate]").inner_text() == "90.0 %"
    assert week.locator("[data-p50]").inner_text().endswith(" s")
    screenshot(page, "job_insight")
    assert page.problems == []


def test_the_overview_shows_the_failure_heatmap(page, world):
    log_in(page, world["server"])

    heatmap = page.locator("[data-failure-heatmap] svg")
    assert heatmap.is_visible()
    rows = heatmap.locator("[data-heat-row]")
    assert [rows.nth(i).get_attribute("data-heat-row") for i in range(rows.count())] == [
        "all",
        "busy",
        "flaky",
    ]
    flaky = heatmap.locator("[data-heat-row=flaky] rect.heat")
    assert flaky.count() == 24
    settled = [
        (int(cell.get_attribute("data-failed")), int(cell.get_attribute("data-total")))
        for cell in flaky.all()
        if cell.get_attribute("data-total") != "0"
    ]
    assert sum(failed for failed, _ in settled) == 2
    assert sum(total for _, total in settled) == 3
    assert heatmap.locator("[data-heat-row=all] rect.heat:not(.heat-none)").count() >= 17
    screenshot(page, "overview_heatmap")

    heatmap.locator("[data-heat-row=flaky] .row-label").click()
    page.wait_for_url("**/jobs/flaky/")
    assert page.problems == []
