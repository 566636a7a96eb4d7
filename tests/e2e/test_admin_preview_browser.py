"""The job form's live fire-time preview in headless Chromium against a real
uvicorn: it follows the schedule as it is typed, says what is wrong with a
broken one, and names on hover why the calendar blocks a candidate.

Same requirements as tests/e2e/test_browser.py (system Chromium, playwright).
"""

from datetime import UTC, datetime, timedelta

import pytest

from tests.e2e.test_browser import (  # noqa: F401 - chromium is a fixture
    PASSWORD,
    USERNAME,
    chromium,
    django_shell,
    screenshot,
)

pytestmark = pytest.mark.e2e

PREVIEW_PATH = "/admin/scheduler/job/preview/"

WORLD = """
from datetime import date
from django.contrib.auth import get_user_model
from calendars.models import Calendar, CalendarPeriod

get_user_model().objects.create_superuser({username!r}, "ops@example.com", {password!r})
ops = Calendar.objects.create(name="ops", timezone="UTC")
CalendarPeriod.objects.create(
    calendar=ops, kind="exclude", label="release freeze",
    start_date=date.fromisoformat({frozen!r}), end_date=date.fromisoformat({frozen!r}),
)
out(ops.pk)
"""


@pytest.fixture
def page(chromium, server, e2e_database):  # noqa: F811 - the imported fixture
    frozen = (datetime.now(UTC) + timedelta(days=2)).date().isoformat()
    django_shell(e2e_database, WORLD.format(username=USERNAME, password=PASSWORD, frozen=frozen))
    context = chromium.new_context(
        timezone_id="Asia/Tokyo", viewport={"width": 1360, "height": 1400}
    )
    page = context.new_page()
    problems = []
    # The preview answers a broken schedule with a 400: that one is expected.
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on(
        "response",
        lambda r: r.status >= 400 and PREVIEW_PATH not in r.url and problems.append(r.url),
    )
    page.problems = problems
    page.frozen = frozen
    page.server = server
    yield page
    context.close()


def log_in_to_the_admin(page):
    page.goto(page.server.url + "/admin/login/?next=/admin/scheduler/job/add/")
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/scheduler/job/add/")


def preview_shows(page, text):
    page.wait_for_function(
        "t => (document.querySelector('[data-fire-preview]') || {}).textContent.includes(t)",
        arg=text,
        timeout=15_000,
    )


def test_the_preview_follows_the_schedule_as_it_is_typed(page):
    log_in_to_the_admin(page)
    preview = page.locator("[data-fire-preview]")
    page.fill("#id_timezone", "Europe/Berlin")

    # Typed key by key: the list follows once the typing pauses.
    page.locator("#id_schedule").type("*/20 * * * *", delay=40)
    page.wait_for_function(
        "document.querySelectorAll('[data-fire-preview] li').length === 10", timeout=15_000
    )
    walls = preview.locator("li time").all_inner_texts()
    assert all(w.endswith(("CET", "CEST")) for w in walls), walls
    assert all(w[14:16] in ("00", "20", "40") for w in walls), walls  # the minutes
    assert preview.locator("li .quiet").first.inner_text().endswith("UTC)")
    screenshot(page, "admin-preview-typed")

    # One more key breaks it: the preview says why, no 500, no stale list.
    page.locator("#id_schedule").press("End")
    page.locator("#id_schedule").type(" *")
    preview_shows(page, "has 6 fields; cron needs 5")
    assert preview.locator("li").count() == 0
    assert preview.locator("[data-preview-error]").is_visible()
    screenshot(page, "admin-preview-error")

    # A daily job on a calendar that freezes one day: that day's candidate is
    # struck through, and hovering it names the freeze.
    page.fill("#id_schedule", "0 9 * * *")
    page.fill("#id_timezone", "UTC")
    page.select_option("#id_calendar", label="ops")
    blocked = preview.locator("li.blocked")
    blocked.wait_for(timeout=15_000)
    assert blocked.count() == 1
    assert blocked.locator("del").inner_text() == f"{page.frozen} 09:00:00 UTC"
    blocked.hover()
    assert blocked.get_attribute("title") == "release freeze (calendar ops): skipped"
    assert preview.locator("li:not(.blocked)").count() == 10
    screenshot(page, "admin-preview-blocked")

    # Show more: the next 90 days of a daily job.
    preview.locator("[data-preview-more]").click()
    page.wait_for_function(
        "document.querySelectorAll('[data-fire-preview] li:not(.blocked)').length > 80",
        timeout=15_000,
    )
    assert preview.locator("[data-preview-more]").count() == 0

    # More schedules and a run limit, typed: the list follows them too.
    page.fill("#id_schedule", "")
    page.fill("#id_schedules", "0 9 * * *\n30 21 * * *")
    page.fill("#id_max_runs", "3")
    page.wait_for_function(
        "document.querySelectorAll('[data-fire-preview] li:not(.blocked)').length === 3",
        timeout=15_000,
    )
    walls = preview.locator("li:not(.blocked) time").all_inner_texts()
    assert sorted(w[11:16] for w in walls) in (
        ["09:00", "21:30", "21:30"],
        ["09:00", "09:00", "21:30"],
    )
    assert page.problems == []
