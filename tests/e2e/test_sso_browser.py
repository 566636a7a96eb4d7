"""Single sign-on in headless Chromium (docs/design.md §11) against a real
uvicorn and a real OpenID provider (oidc-provider on Node,
harness/oidc_provider.py): "Sign in with SSO", the provider's login and
consent pages, back on the dashboard signed in with the role the groups
claim grants; after the provider's groups change, the next login re-reads
them; a user whose groups grant no role is refused, and with
CRONIQ_OIDC_ONLY a superuser still signs in with the password.

Same browser setup as test_browser.py. Screenshots land in
test-artifacts/screenshots/ (sso-*).
"""

import os

import pytest

from croniq_project.sso_settings import CALLBACK_PATH
from harness.oidc_provider import CLIENT_ID, CLIENT_SECRET, OIDCProvider, missing_node
from harness.processes import Server, free_port
from tests.e2e.test_browser import chromium, django_shell, screenshot  # noqa: F401 (a fixture)

pytestmark = pytest.mark.e2e

ROOT_PASSWORD = "croniq-root-pw"
ACCOUNTS = {
    "alice": {"email": "alice@example.com", "groups": ["croniq:default:viewer", "everyone"]},
    "mallory": {"email": "mallory@example.com", "groups": ["everyone"]},
}

WORLD = """
from django.contrib.auth import get_user_model

get_user_model().objects.create_superuser("root", password={password!r})
out(True)
"""

ROLES = """
from django.contrib.auth import get_user_model
from projects.models import Role

user = get_user_model().objects.filter(username={username!r}).first()
out(user and {{
    "groups": sorted(user.groups.values_list("name", flat=True)),
    "roles": sorted(
        project + ":" + role
        for project, role in Role.objects.filter(user=user).values_list("project__name", "role")
    ),
    "is_staff": user.is_staff,
    "is_superuser": user.is_superuser,
    "usable_password": user.has_usable_password(),
}})
"""


@pytest.fixture
def node():
    reason = missing_node()
    if reason:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"the SSO browser test must run in CI: {reason}")
        pytest.skip(reason)


@pytest.fixture
def sso(node, e2e_database, tmp_path):
    """The provider and Croniq's server, each knowing the other's address."""
    port = free_port()
    provider = OIDCProvider(
        f"http://127.0.0.1:{port}{CALLBACK_PATH}", ACCOUNTS, tmp_path / "provider.log"
    )
    server = None
    try:
        provider.wait_ready(timeout=60)
        server = Server(
            e2e_database,
            tmp_path / "web.log",
            port=port,
            CRONIQ_OIDC_ISSUER=provider.issuer,
            CRONIQ_OIDC_CLIENT_ID=CLIENT_ID,
            CRONIQ_OIDC_CLIENT_SECRET=CLIENT_SECRET,
            CRONIQ_OIDC_ONLY="true",
            CRONIQ_REQUIRE_2FA="true",
        )
        server.wait_ready(timeout=60)
        django_shell(e2e_database, WORLD.format(password=ROOT_PASSWORD))
        yield provider, server, e2e_database
    finally:
        if server is not None:
            server.stop()
        provider.stop()


@pytest.fixture
def browser_page(chromium, sso):  # noqa: F811 (the imported fixture)
    context = chromium.new_context(viewport={"width": 1200, "height": 900})
    # The provider's development pages import a web font: nothing leaves the machine.
    context.route("https://**/*", lambda route: route.abort())
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.problems = problems
    yield page
    context.close()


def roles(database, username):
    return django_shell(database, ROLES.format(username=username))


def sign_in_with_sso(page, server, login=None, shot=None):
    page.goto(server.url + "/runners/")
    page.wait_for_url("**/accounts/login/?next=/runners/")
    if shot:
        screenshot(page, f"{shot}-login-page")
    page.click("#sso-form input[type=submit]")
    if login is None:
        return
    # The provider's login page (any password), then its consent page.
    page.wait_for_selector("input[name=login]")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any")
    if shot:
        screenshot(page, f"{shot}-provider-login")
    page.click("button[type=submit]")
    page.wait_for_selector("input[name=prompt][value=consent]", state="attached")
    if shot:
        screenshot(page, f"{shot}-provider-consent")
    page.click("button[type=submit]")


def log_out(page, server):
    page.click("header.top .user button[type=submit]")
    page.wait_for_url(server.url + "/accounts/login/")


def test_sso_signs_in_with_the_mapped_role_and_rereads_it_at_each_login(browser_page, sso):
    provider, server, database = sso
    page = browser_page

    sign_in_with_sso(page, server, login="alice", shot="sso")
    page.wait_for_url(server.url + "/runners/")
    assert "alice" in page.inner_text("header.top .user")
    screenshot(page, "sso-signed-in")
    assert roles(database, "alice") == {
        "groups": [],
        "roles": ["default:viewer"],
        "is_staff": True,
        "is_superuser": False,
        "usable_password": False,
    }
    log_out(page, server)

    # The provider now grants operator and superuser: the next login (the
    # provider remembers the session and the consent) re-reads them.
    provider.set_accounts(
        {
            **ACCOUNTS,
            "alice": {**ACCOUNTS["alice"], "groups": ["/croniq:default:operator", "croniq:admin"]},
        }
    )
    sign_in_with_sso(page, server)
    page.wait_for_url(server.url + "/runners/")
    assert roles(database, "alice")["roles"] == ["default:operator"]
    assert roles(database, "alice")["is_superuser"] is True
    log_out(page, server)

    # Groups granting nothing: refused, and the roles are gone.
    provider.set_accounts({**ACCOUNTS, "alice": {**ACCOUNTS["alice"], "groups": ["everyone"]}})
    sign_in_with_sso(page, server)
    page.wait_for_selector("[data-sso-refused]")
    assert "grants you no Croniq role" in page.inner_text("[data-sso-refused]")
    screenshot(page, "sso-refused-no-role")
    assert roles(database, "alice") == {
        "groups": [],
        "roles": [],
        "is_staff": False,
        "is_superuser": False,
        "usable_password": False,
    }
    page.goto(server.url + "/runners/")
    page.wait_for_url("**/accounts/login/?next=/runners/")
    assert page.problems == []


def test_a_newcomer_without_a_role_is_refused_and_superusers_keep_the_password(browser_page, sso):
    provider, server, database = sso
    page = browser_page

    sign_in_with_sso(page, server, login="mallory")
    page.wait_for_selector("[data-sso-refused]")
    assert roles(database, "mallory") is None

    # CRONIQ_OIDC_ONLY: the password form is folded away for superusers.
    page.goto(server.url + "/accounts/login/")
    assert not page.locator("#login-form").is_visible()
    page.click("details[data-break-glass] summary")
    screenshot(page, "sso-only-break-glass")
    page.fill("input[name=username]", "root")
    page.fill("input[name=password]", ROOT_PASSWORD)
    page.click("#login-form input[type=submit]")
    # A superuser with a password is held to the second factor (CRONIQ_REQUIRE_2FA).
    page.wait_for_url("**/accounts/reauthenticate/**")
    assert page.problems == []
