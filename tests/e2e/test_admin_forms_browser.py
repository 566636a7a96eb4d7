"""The admin's job and calendar forms in headless Chromium against a real
uvicorn: weekday checkboxes, tags and env rows survive a save and a reopen.
Screenshots land in test-artifacts/screenshots/."""

import pytest

from tests.e2e import test_browser
from tests.e2e.test_browser import django_shell, log_in, screenshot

# The dashboard's browser fixtures: headless Chromium, a real uvicorn, a small world.
chromium, server, world, page = (
    test_browser.chromium,
    test_browser.server,
    test_browser.world,
    test_browser.page,
)

pytestmark = pytest.mark.e2e

WEEKDAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


@pytest.fixture
def admin_page(page, world):
    django_shell(
        world["db"],
        """
        from django.contrib.auth import get_user_model
        get_user_model().objects.filter(username="operator").update(is_superuser=True)
        out(1)
        """,
    )
    log_in(page, world["server"])
    return page


def ticked_weekdays(page):
    return [day for day in WEEKDAYS if page.is_checked(f"input[name=weekdays][value={day}]")]


def offered_categories(page):
    """The holiday categories the calendar form shows, as the script left them."""
    return sorted(
        page.locator("#id_holiday_categories [data-choice]:visible").evaluate_all(
            "choices => choices.map(choice => choice.dataset.choice)"
        )
    )


def test_a_calendar_keeps_its_ticked_weekdays(admin_page, world):
    page, server = admin_page, world["server"]
    page.goto(server.url + "/admin/calendars/calendar/add/")
    assert ticked_weekdays(page) == WEEKDAYS  # a new calendar allows every day
    page.fill("input[name=name]", "early-week")
    for day in WEEKDAYS[2:]:
        page.uncheck(f"input[name=weekdays][value={day}]")
    page.fill("input[name=timezone]", "Europe/Berlin")
    assert offered_categories(page) == []  # no country yet, so none of its categories
    page.fill("input[name=holiday_country]", "US")
    assert "half_day" in offered_categories(page)
    page.fill("input[name=holiday_country]", "DE")
    assert offered_categories(page) == ["catholic", "public", "school"]
    page.check("input[name=holiday_categories][value=public]")
    screenshot(page, "admin-calendar-form")
    page.click("input[name=_continue]")
    page.wait_for_url("**/admin/calendars/calendar/*/change/")
    assert page.locator(".errornote").count() == 0

    page.reload()
    assert ticked_weekdays(page) == ["mon", "tue"]
    assert page.is_checked("input[name=holiday_categories][value=public]")
    assert page.input_value("input[name=timezone]") == "Europe/Berlin"
    screenshot(page, "admin-calendar-form-saved")
    stored = django_shell(
        world["db"],
        """
        from calendars.models import Calendar
        calendar = Calendar.objects.get(name="early-week")
        out([calendar.weekdays, calendar.holiday_categories])
        """,
    )
    assert stored == [["mon", "tue"], ["public"]]
    assert page.problems == []


def test_a_job_keeps_its_typed_tags_and_env_rows(admin_page, world):
    page, server = admin_page, world["server"]
    page.goto(server.url + "/admin/scheduler/job/add/")
    page.fill("input[name=name]", "gpu-report")
    page.fill("textarea[name=command]", "python report.py")
    page.fill("input[name=schedule]", "30 2 * * *")
    page.fill("input[name=timezone]", "Europe/Berlin")
    page.click("#id_labels")  # the tag entry, which the field's label points at
    page.keyboard.type("linux, gpu")
    assert page.locator(".tags-input .tag").count() == 1  # the comma ended "linux"
    page.locator("input[name=env__name]").last.fill("REPORT_DIR")
    page.locator("input[name=env__value]").last.fill("/srv/reports")
    page.click("[data-add-row]")
    page.locator("input[name=env__name]").last.fill("LEVEL")
    page.locator("input[name=env__value]").last.fill("3")
    screenshot(page, "admin-job-form")
    page.click("input[name=_continue]")  # ends the typed "gpu" too
    page.wait_for_url("**/admin/scheduler/job/*/change/")
    assert page.locator(".errornote").count() == 0

    page.reload()
    tags = page.locator(".tags-input .tag")
    assert [tags.nth(i).get_attribute("data-tag") for i in range(tags.count())] == [
        "linux",
        "gpu",
    ]
    names = page.locator("input[name=env__name]")
    values = page.locator("input[name=env__value]")
    rows = [(names.nth(i).input_value(), values.nth(i).input_value()) for i in range(3)]
    # Rows come in the stored order (PostgreSQL's jsonb orders keys its own way),
    # then the blank row.
    assert dict(rows[:2]) == {"REPORT_DIR": "/srv/reports", "LEVEL": "3"}
    assert rows[2] == ("", "") and names.count() == 3
    screenshot(page, "admin-job-form-saved")

    # A tag removed and a row removed are gone after the next save.
    page.click(".tags-input .tag[data-tag=linux] button")
    page.locator("tr[data-row]", has=page.locator("input[value=REPORT_DIR]")).locator(
        "[data-remove-row]"
    ).click()
    page.click("input[name=_continue]")
    page.wait_for_url("**/admin/scheduler/job/*/change/")
    stored = django_shell(
        world["db"],
        """
        from scheduler.models import Job
        job = Job.objects.get(name="gpu-report")
        out([job.labels, job.env])
        """,
    )
    assert stored == [["gpu"], {"LEVEL": "3"}]
    assert page.problems == []
