"""Two-factor sign-in in headless Chromium against a real uvicorn
(docs/design.md §11), with CRONIQ_REQUIRE_2FA on: a staff user signs in
with the password, is sent to enrol, scans (reads) the secret, turns TOTP
on with a code computed here (RFC 6238, tests/totp.py), and keeps the
recovery codes; then signs in with a code from the app, with a recovery
code, and is refused a wrong code and the used recovery code.

Same browser setup as test_browser.py. Screenshots land in
test-artifacts/screenshots/ (sign-in-*, two-factor-*).
"""

import time

import pytest

from harness.processes import Server
from tests.e2e.test_browser import chromium, django_shell, screenshot  # noqa: F401 (a fixture)
from tests.totp import STEP, totp

pytestmark = pytest.mark.e2e

USERNAME, PASSWORD = "operator", "croniq-operator-pw"

WORLD = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

user = get_user_model().objects.create_user({username!r}, password={password!r}, is_staff=True)
user.groups.add(Group.objects.get(name="Croniq viewers"))
out(True)
"""


@pytest.fixture
def server(e2e_database, tmp_path):
    process = Server(e2e_database, tmp_path / "web.log", CRONIQ_REQUIRE_2FA="true")
    try:
        process.wait_ready(timeout=60)
        django_shell(e2e_database, WORLD.format(username=USERNAME, password=PASSWORD))
        yield process
    finally:
        process.stop()


@pytest.fixture
def browser_page(chromium, server):  # noqa: F811 (the imported fixture)
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"))
    page.problems = problems
    yield page
    context.close()


def give_password(page, server, shot=None):
    page.goto(server.url + "/")
    page.wait_for_url("**/accounts/login/?next=/")
    if shot:
        screenshot(page, shot)
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")


def give_code(page, code):
    page.wait_for_url("**/accounts/2fa/authenticate/")
    page.fill("input[name=code]", code)
    page.click("input[type=submit]")


def log_out(page, server):
    page.click("header.top .user button[type=submit]")
    page.wait_for_url(server.url + "/accounts/login/")


def a_wrong_code(secret):
    """A code no step within the tolerance (one either way) has now."""
    now = time.time()
    taken = {totp(secret, now + offset * STEP) for offset in (-2, -1, 0, 1, 2)}
    return next(code for code in (f"{n:06d}" for n in range(1_000_000)) if code not in taken)


def test_a_staff_user_enrols_then_signs_in_with_a_code_and_a_recovery_code(browser_page, server):
    page = browser_page

    # The password alone signs in, then every page sends the user to enrol.
    give_password(page, server, shot="sign-in-login")
    page.wait_for_url("**/accounts/reauthenticate/**")
    screenshot(page, "sign-in-confirm-password")
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/accounts/2fa/totp/activate/?required=1")
    assert page.locator("[data-enrolment-required]").is_visible()
    assert page.locator("img[data-totp-qr]").is_visible()
    screenshot(page, "two-factor-enrol")
    page.goto(server.url + "/runners/")
    page.wait_for_url("**/accounts/2fa/totp/activate/?required=1")
    # Each showing of the page draws a new secret: the one shown last counts.
    secret = page.inner_text("[data-totp-secret]").strip()

    # An app's code turns TOTP on; the recovery codes follow.
    page.fill("input[name=code]", totp(secret, time.time()))
    page.click("form.two-factor-form button[type=submit]")
    page.wait_for_url("**/accounts/2fa/recovery-codes/")
    codes = page.locator("[data-recovery-codes] code").all_inner_texts()
    assert len(codes) == 10
    screenshot(page, "two-factor-recovery-codes")
    page.goto(server.url + "/runners/")
    page.wait_for_url(server.url + "/runners/")
    page.click("[data-two-factor]")
    page.wait_for_url("**/accounts/2fa/")
    assert "On:" in page.inner_text("[data-totp]")
    screenshot(page, "two-factor-index")
    log_out(page, server)

    # Signing in now asks for a code after the password.
    give_password(page, server)
    page.wait_for_url("**/accounts/2fa/authenticate/")
    screenshot(page, "sign-in-code")
    give_code(page, totp(secret, time.time()))
    page.wait_for_url(server.url + "/")
    log_out(page, server)

    # A recovery code stands in for the app's code.
    give_password(page, server)
    give_code(page, codes[0])
    page.wait_for_url(server.url + "/")
    log_out(page, server)

    # A wrong code, and the recovery code already used, are refused.
    give_password(page, server)
    give_code(page, a_wrong_code(secret))
    page.wait_for_selector("p.errornote")
    assert page.inner_text("p.errornote") == "Incorrect code."
    assert page.url.endswith("/accounts/2fa/authenticate/")
    screenshot(page, "sign-in-wrong-code")
    give_code(page, codes[0])
    page.wait_for_selector("p.errornote")
    assert page.inner_text("p.errornote") == "Incorrect code."
    # Still not signed in: the dashboard sends the user back to the login,
    # which resumes at the code step.
    page.goto(server.url + "/runners/")
    page.wait_for_url("**/accounts/2fa/authenticate/")
    assert page.problems == []
