"""Signing in through single sign-on (croniq_project/sso.py) with the
client and allauth's own views: users made at first login, the roles claim
read at each login (croniq_project/sso_roles.py), and the refusals."""

from urllib.parse import parse_qs, urlsplit

import pytest
from allauth.socialaccount.models import SocialAccount
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from croniq_project import sso_settings
from projects.models import Project, Role
from tests.sign_in.conftest import PASSWORD
from tests.sso.conftest import signed_in_as, sso_login

pytestmark = pytest.mark.django_db

ALICE = {"sub": "u-1", "preferred_username": "alice", "email": "alice@example.com"}


def held_roles(user):
    """[(project, role)] the user holds, as (project, role, from single sign-on)."""
    return sorted(Role.objects.filter(user=user).values_list("project__name", "role", "from_sso"))


def test_the_login_page_offers_sso_only_when_configured(client, settings):
    assert "Sign in with SSO" not in client.get("/accounts/login/").content.decode()
    settings.SOCIALACCOUNT_PROVIDERS = sso_settings.providers(
        sso_settings.OIDC("https://idp.example", "croniq", "s", "groups", False)
    )
    page = client.get("/accounts/login/?next=/runners/").content.decode()
    assert 'action="/accounts/oidc/sso/login/"' in page
    assert 'value="Sign in with SSO"' in page
    # The password form stays, unfolded, and both carry where to go next.
    assert 'id="login-form"' in page and "data-break-glass" not in page
    assert page.count('<input type="hidden" name="next" value="/runners/">') == 2


def test_starting_a_sign_in_sends_the_browser_to_the_provider_with_pkce(client, oidc):
    answer = client.post("/accounts/oidc/sso/login/")
    location = urlsplit(answer["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == "https://idp.example/auth"
    query = parse_qs(location.query)
    assert query["code_challenge_method"] == ["S256"]
    assert len(query["code_challenge"][0]) == 43
    assert query["response_type"] == ["code"]
    assert query["client_id"] == ["croniq"]
    assert query["redirect_uri"] == ["http://testserver/accounts/oidc/sso/login/callback/"]
    # A GET only shows a button: a link elsewhere starts no sign-in.
    assert client.get("/accounts/oidc/sso/login/").status_code == 200


def test_a_first_login_makes_the_user_with_the_roles_granted(client, oidc):
    claims = {**ALICE, "groups": ["croniq:default:operator", "staff-everyone"]}
    answer = sso_login(client, oidc, claims, next_url="/runners/")
    assert answer.status_code == 302
    assert answer["Location"] == "/runners/"
    user = signed_in_as(client)
    assert user.username == "alice"
    assert user.email == "alice@example.com"
    assert user.is_staff and not user.is_superuser
    assert not user.has_usable_password()
    assert held_roles(user) == [("default", "operator", True)]
    assert SocialAccount.objects.get(user=user).uid == "u-1"
    # The PKCE verifier went with the code.
    assert oidc.verifiers and len(oidc.verifiers[0]) >= 43
    assert client.get("/runners/").status_code == 200


@pytest.mark.parametrize("role", ["viewer", "operator", "editor", "admin"])
def test_each_role_is_held_in_its_project_and_no_global_group(client, oidc, role):
    Project.objects.create(name="payroll")
    sso_login(client, oidc, {**ALICE, "groups": [f"croniq:payroll:{role}"]})
    user = signed_in_as(client)
    assert held_roles(user) == [("payroll", role, True)]
    assert not user.groups.exists()  # nothing granted on every project


def test_each_login_rereads_the_roles_adding_and_removing(client, oidc):
    user_groups = Group.objects.create(name="Payroll")
    sso_login(client, oidc, {**ALICE, "groups": ["croniq:default:viewer"]})
    user = signed_in_as(client)
    user.groups.add(user_groups)  # not Croniq's: left alone
    client.post("/accounts/logout/")

    sso_login(client, oidc, {**ALICE, "groups": ["croniq:default:admin", "croniq:admin"]})
    user = signed_in_as(client)
    assert held_roles(user) == [("default", "admin", True)]
    assert user.is_superuser and user.is_staff
    client.post("/accounts/logout/")

    sso_login(client, oidc, {**ALICE, "groups": ["/croniq:default:viewer"]})
    user = signed_in_as(client)
    assert held_roles(user) == [("default", "viewer", True)]
    assert not user.is_superuser and user.is_staff
    assert user.groups.filter(name="Payroll").exists()
    assert get_user_model().objects.filter(username="alice").count() == 1


def test_croniq_admin_alone_makes_a_superuser(client, oidc):
    sso_login(client, oidc, {**ALICE, "groups": "croniq:admin"})
    user = signed_in_as(client)
    assert user.is_superuser and user.is_staff
    assert held_roles(user) == []


def test_a_login_with_no_croniq_role_is_refused_and_makes_no_user(client, oidc):
    answer = sso_login(client, oidc, {**ALICE, "groups": ["staff-everyone"]})
    assert answer.status_code == 403
    page = answer.content.decode()
    assert "grants you no Croniq role" in page
    assert "croniq:default:viewer" in page
    assert signed_in_as(client) is None
    assert not get_user_model().objects.filter(username="alice").exists()
    # No claim at all is no role either.
    assert sso_login(client, oidc, dict(ALICE)).status_code == 403


def test_a_known_user_whose_roles_are_gone_is_refused_and_loses_them(client, oidc):
    sso_login(client, oidc, {**ALICE, "groups": ["croniq:default:admin", "croniq:admin"]})
    client.post("/accounts/logout/")
    answer = sso_login(client, oidc, {**ALICE, "groups": []})
    assert answer.status_code == 403
    assert signed_in_as(client) is None
    user = get_user_model().objects.get(username="alice")
    assert held_roles(user) == []
    assert not user.is_staff and not user.is_superuser


def test_a_role_in_a_project_that_does_not_exist_is_ignored_and_logged(client, oidc, caplog):
    claims = {**ALICE, "groups": ["croniq:payroll:admin", "croniq:default:viewer"]}
    sso_login(client, oidc, claims)
    assert held_roles(signed_in_as(client)) == [("default", "viewer", True)]
    assert "'croniq:payroll:admin' grants nothing" in caplog.text
    client.post("/accounts/logout/")
    # Alone it grants no role: refused.
    answer = sso_login(client, oidc, {**ALICE, "sub": "u-2", "groups": ["croniq:payroll:admin"]})
    assert answer.status_code == 403


def test_a_role_an_admin_gave_by_hand_is_left_alone(client, oidc):
    sso_login(client, oidc, {**ALICE, "groups": ["croniq:default:viewer"]})
    user = signed_in_as(client)
    payroll = Project.objects.create(name="payroll")
    Role.objects.create(project=payroll, user=user, role="admin")  # the project's page
    client.post("/accounts/logout/")
    sso_login(client, oidc, {**ALICE, "groups": ["croniq:payroll:viewer", "croniq:default:editor"]})
    assert held_roles(user) == [("default", "editor", True), ("payroll", "admin", False)]


@pytest.mark.parametrize("name", ["alice", "Alice"])
def test_a_new_login_never_takes_over_a_local_user_of_the_same_name(client, oidc, name):
    local = get_user_model().objects.create_superuser(name, password=PASSWORD)
    answer = sso_login(client, oidc, {**ALICE, "groups": ["croniq:default:viewer"]})
    assert answer.status_code == 403
    assert "would take it over" in answer.content.decode()
    assert signed_in_as(client) is None
    assert not SocialAccount.objects.exists()
    local.refresh_from_db()
    assert local.is_superuser and local.has_usable_password()


def test_a_linked_user_signs_in_whatever_name_the_provider_now_sends(client, oidc):
    sso_login(client, oidc, {**ALICE, "groups": ["croniq:default:viewer"]})
    client.post("/accounts/logout/")
    answer = sso_login(
        client, oidc, {**ALICE, "preferred_username": "root", "groups": ["croniq:default:viewer"]}
    )
    assert answer.status_code == 302
    assert signed_in_as(client).username == "alice"


def test_a_local_superuser_is_not_demoted_by_anyone_s_sso_login(client, oidc):
    local = get_user_model().objects.create_superuser("root", password=PASSWORD)
    sso_login(client, oidc, {**ALICE, "groups": ["croniq:default:viewer"]})
    local.refresh_from_db()
    assert local.is_superuser and local.is_staff


@pytest.mark.parametrize(
    ("claims", "username"),
    [
        ({"sub": "u-9", "email": "bob@example.com"}, "bob@example.com"),
        ({"sub": "u-9"}, "u-9"),
        (
            {"sub": "u-9", "preferred_username": "bad name!", "email": "b@example.com"},
            "b@example.com",
        ),
    ],
)
def test_the_username_falls_back_to_the_email_then_sub(client, oidc, claims, username):
    sso_login(client, oidc, {**claims, "groups": ["croniq:default:viewer"]})
    assert signed_in_as(client).username == username


def test_no_usable_username_is_refused_saying_so(client, oidc):
    answer = sso_login(client, oidc, {"sub": "auth0|abc", "groups": ["croniq:default:viewer"]})
    assert answer.status_code == 403
    assert "no usable username" in answer.content.decode()


def test_an_email_a_local_user_has_signs_into_nothing_of_theirs(client, oidc):
    local = get_user_model().objects.create_user("bob", email="alice@example.com", is_staff=True)
    sso_login(client, oidc, {**ALICE, "groups": ["croniq:default:viewer"]})
    user = signed_in_as(client)
    assert user.username == "alice" and user.pk != local.pk


def test_sso_sessions_skip_the_required_second_factor(client, oidc, settings):
    settings.CRONIQ_REQUIRE_2FA = True
    sso_login(client, oidc, {**ALICE, "groups": ["croniq:default:viewer"]})
    answer = client.get("/runners/")
    assert answer.status_code == 200


def test_a_provider_error_shows_a_page_not_a_500(client, oidc, caplog):
    start = client.post("/accounts/oidc/sso/login/")
    state = parse_qs(urlsplit(start["Location"]).query)["state"][0]
    answer = client.get(
        sso_settings.CALLBACK_PATH,
        {"state": state, "error": "server_error", "error_description": "db down"},
    )
    assert answer.status_code == 401
    assert "Signing in with SSO failed" in answer.content.decode()
    assert "'server_error' 'db down'" in caplog.text
    assert signed_in_as(client) is None
    cancelled = client.post("/accounts/oidc/sso/login/")
    state = parse_qs(urlsplit(cancelled["Location"]).query)["state"][0]
    answer = client.get(sso_settings.CALLBACK_PATH, {"state": state, "error": "access_denied"})
    assert answer["Location"] == "/accounts/social/login/cancelled/"
    assert "was cancelled" in client.get(answer["Location"]).content.decode()
