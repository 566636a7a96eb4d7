"""The dashboard's light and dark themes follow the system's
`prefers-color-scheme`, and its controls are styled, not the browser's own:
headless Chromium against a real uvicorn, emulating each scheme.
Screenshots of the overview, a job, the runners and the audit pages in both
land in test-artifacts/screenshots/ (theme-<scheme>-<page>.png)."""

import pytest

from tests.e2e import test_browser
from tests.e2e.test_browser import log_in, screenshot

# The dashboard's browser fixtures: headless Chromium, a real uvicorn, a small world.
chromium, server, world, page = (
    test_browser.chromium,
    test_browser.server,
    test_browser.world,
    test_browser.page,
)

pytestmark = pytest.mark.e2e

PAGES = {
    "overview": "/",
    "job": "/jobs/nightly-report/",
    "runners": "/runners/",
    "audit": "/audit/",
}


def computed(page, selector, prop):
    return page.locator(selector).first.evaluate(f"element => getComputedStyle(element).{prop}")


def brightness(rgb):
    """The mean channel of a computed `rgb(r, g, b)` colour, 0 to 255."""
    channels = rgb.removeprefix("rgba(").removeprefix("rgb(").rstrip(")").split(",")[:3]
    return sum(int(float(c)) for c in channels) / 3


def test_each_page_follows_the_systems_colour_scheme(page, world):
    server = world["server"]
    log_in(page, server)
    seen = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for name, path in PAGES.items():
            page.goto(server.url + path)
            page.wait_for_load_state("load")
            seen[scheme, name] = {
                "body": computed(page, "body", "backgroundColor"),
                "table": computed(page, "table", "backgroundColor"),
                "text": computed(page, "body", "color"),
            }
            screenshot(page, f"theme-{scheme}-{name}")
    for name in PAGES:
        light, dark = seen["light", name], seen["dark", name]
        assert light["body"] != dark["body"], name
        assert light["table"] != dark["table"], name
        assert brightness(light["body"]) > brightness(light["text"]), name
        assert brightness(dark["body"]) < brightness(dark["text"]), name
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
