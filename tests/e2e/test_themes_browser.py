"""Every page of Croniq in both colour schemes, in headless Chromium against
a real uvicorn emulating each `prefers-color-scheme`: the dashboard's GET
pages (tests/dashboard/test_layout.py fails when dashboard/urls.py has one
this list lacks), signing in, the two-factor pages and the admin's. Each
answers 200 with no console error; its background is dark in the dark scheme
and light in the light one; and its header bar, the admin's and the sign-in
pages' included, is the dashboard's, not Django's stock blue. The admin's
theme toggle still beats the system's scheme, and the dashboard's controls
are styled, not the browser's own. One browser and one server for all the
pages, visited in a loop. Screenshots land in test-artifacts/screenshots/
(theme-<scheme>-<page>.png).
"""

import pytest

from tests.e2e import test_browser
from tests.e2e.test_browser import PASSWORD, USERNAME, django_shell, log_in, screenshot

# The dashboard's browser fixtures: headless Chromium, a real uvicorn, a small world.
chromium, server, world, page = (
    test_browser.chromium,
    test_browser.server,
    test_browser.world,
    test_browser.page,
)

pytestmark = pytest.mark.e2e

SCHEMES = ("dark", "light")

# Every page a signed-in operator opens, by screenshot name; {job},
# {calendar} and {finished} are the world's.
PAGES = {
    "overview": "/",
    "overview-filtered": "/?state=running&q=report",
    "job": "/jobs/nightly-report/",
    "execution": "/executions/{finished}/",
    "runners": "/runners/",
    "capacity": "/capacity/",
    "audit": "/audit/",
    "alerts": "/alerts/",
    "dead-letters": "/dead-letters/",
    "checks": "/checks/",
    "check": "/checks/db1-backup/",
    "two-factor": "/accounts/2fa/",
    "admin": "/admin/",
    "admin-jobs": "/admin/scheduler/job/",
    "admin-job": "/admin/scheduler/job/{job}/change/",
    "admin-calendar": "/admin/calendars/calendar/{calendar}/change/",
}
# Django's stock header blues (its --secondary and --primary).
DJANGO_HEADERS = {"rgb(65, 118, 144)", "rgb(121, 174, 200)"}
# A user with an authenticator app, to reach the login's code step.
GUARDED, SECRET = "guarded", "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"

WORLD = """
from allauth.mfa.totp.internal.auth import TOTP
from django.contrib.auth import get_user_model
from calendars.models import Calendar
from checks.models import Check
from scheduler.models import Execution, Job
from scheduler.triage.dead_letters import DeadLetter

users = get_user_model().objects
users.filter(username={operator!r}).update(is_superuser=True)
TOTP.activate(users.create_user({guarded!r}, password={password!r}, is_staff=True), {secret!r})
Check.objects.create(
    name="db1-backup", schedule="30 2 * * *", timezone="Europe/Berlin", grace=1800,
    description="pg_dump on db1",
)
calendar = Calendar.objects.create(
    name="berlin-workdays", timezone="Europe/Berlin", weekdays=["mon", "tue", "wed", "thu", "fri"],
    holiday_country="DE", holiday_categories=["public"],
)
failed = Execution.objects.filter(state="failed").earliest("scheduled_for")
DeadLetter.objects.create(
    execution=failed, reason="failed", detail="exit code 1", landed_at=failed.finished_at,
)
out({{
    "job": Job.objects.get(name="nightly-report").pk, "calendar": calendar.pk,
    "finished": failed.pk,
}})
"""


@pytest.fixture
def every_page_world(world):
    ids = django_shell(
        world["db"],
        WORLD.format(operator=USERNAME, guarded=GUARDED, password=PASSWORD, secret=SECRET),
    )
    return {**world, **ids}


def computed(page, selector, prop):
    return page.locator(selector).first.evaluate(f"element => getComputedStyle(element).{prop}")


def brightness(rgb):
    """The mean channel of a computed `rgb(r, g, b)` colour, 0 to 255."""
    channels = rgb.removeprefix("rgba(").removeprefix("rgb(").rstrip(")").split(",")[:3]
    return sum(int(float(c)) for c in channels) / 3


def colours(page):
    """The page's ground, text and header bar (the dashboard's or the admin's)."""
    seen = {
        "body": computed(page, "body", "backgroundColor"),
        "text": computed(page, "body", "color"),
        "header": computed(page, "header.top, #header", "backgroundColor"),
    }
    # The dashboard's tables are panels of their own; the admin's are the page.
    if page.locator("header.top").count() and page.locator("table").count():
        seen["table"] = computed(page, "table", "backgroundColor")
    # The calendar form's month grid: its allowed days.
    if page.locator(".calendar-grid td.allowed").count():
        seen["grid"] = computed(page, ".calendar-grid td.allowed", "backgroundColor")
    return seen


def visit(page, url, name, seen):
    """`url` in each scheme: it answers 200, its colours go into `seen`."""
    for scheme in SCHEMES:
        page.emulate_media(color_scheme=scheme)
        answer = page.goto(url)
        assert answer.status == 200, (name, answer.status)
        assert page.url == url, name  # the page itself, not a redirect
        seen[scheme, name] = colours(page)
        screenshot(page, f"theme-{scheme}-{name}")


def toggle(page):
    page.click("#user-tools .theme-toggle")
    return page.evaluate("document.documentElement.dataset.theme")


def test_every_page_wears_the_theme_of_each_scheme(page, every_page_world):
    server, seen = every_page_world["server"], {}

    # Signed out: the sign-in page, then the login's code step.
    visit(page, server.url + "/accounts/login/", "sign-in", seen)
    page.fill("input[name=username]", GUARDED)
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/accounts/2fa/authenticate/")
    visit(page, page.url, "two-factor-code", seen)
    page.click("form.link-form button[type=submit]")  # log in again
    page.wait_for_url("**/accounts/login/")

    log_in(page, server)
    for name, path in PAGES.items():
        visit(page, server.url + path.format(**every_page_world), name, seen)

    for scheme in SCHEMES:
        dashboard = seen[scheme, "overview"]
        for name in ["sign-in", "two-factor-code", *PAGES]:
            shown = seen[scheme, name]
            ground, text = brightness(shown["body"]), brightness(shown["text"])
            if scheme == "dark":
                assert ground < 64 and text > ground, (scheme, name, shown)
            else:
                assert ground > 192 and text < ground, (scheme, name, shown)
            assert shown["header"] == dashboard["header"], (scheme, name, shown)
            assert shown["header"] not in DJANGO_HEADERS, (scheme, name)
    for name in PAGES:
        if "table" in seen["dark", name]:
            assert seen["dark", name]["table"] != seen["light", name]["table"], name
    assert brightness(seen["dark", "admin-calendar"]["grid"]) < 64
    assert brightness(seen["light", "admin-calendar"]["grid"]) > 192

    # The admin's theme toggle beats the system's scheme, both ways.
    page.emulate_media(color_scheme="dark")
    page.goto(server.url + "/admin/")
    assert toggle(page) == "light"
    assert colours(page) == seen["light", "admin"]
    screenshot(page, "theme-toggled-light-admin")
    assert toggle(page) == "dark"
    page.emulate_media(color_scheme="light")
    assert colours(page) == seen["dark", "admin"]
    screenshot(page, "theme-toggled-dark-admin")

    assert page.problems == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_controls_wear_the_themes_colours(page, world, scheme):
    server = world["server"]
    log_in(page, server)
    page.emulate_media(color_scheme=scheme)
    page.goto(server.url + "/audit/")
    button, field = "form.filters button", "form.filters input[name=action]"
    accent = page.evaluate(
        "getComputedStyle(document.documentElement).getPropertyValue('--accent').trim()"
    )
    # The accent as the browser computes it, to compare with the button's.
    probe = page.evaluate(
        """accent => { const p = document.createElement("span"); p.style.color = accent;
        document.body.append(p); const c = getComputedStyle(p).color; p.remove(); return c; }""",
        accent,
    )
    assert computed(page, button, "backgroundColor") == probe
    assert computed(page, field, "backgroundColor") != "rgba(0, 0, 0, 0)"
    body = brightness(computed(page, "body", "backgroundColor"))
    inside = brightness(computed(page, field, "backgroundColor"))
    # A field is as light as the page in the light theme, as dark in the dark one.
    assert (inside > 128) == (body > 128)
    screenshot(page, f"theme-{scheme}-controls")
    assert page.problems == []
