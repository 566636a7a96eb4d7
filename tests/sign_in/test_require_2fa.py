"""CRONIQ_REQUIRE_2FA (croniq_project/two_factor.py): a signed-in staff user
without an authenticator, not signed in through single sign-on, reaches
the enrolment page, signing in and out, static files and the machines'
endpoints, and nothing else, until enrolled; nor turns two-factor off."""

import asyncio

import pytest
from allauth.account.authentication import AUTHENTICATION_METHODS_SESSION_KEY
from allauth.mfa.models import Authenticator
from django.contrib.auth import get_user_model
from django.test import AsyncClient

from croniq_project.two_factor import reachable_without_enrolment
from tests.sign_in.conftest import PASSWORD, confirm_password, log_in
from tests.totp import totp

pytestmark = pytest.mark.django_db

ENROL = "/accounts/2fa/totp/activate/?required=1"
SHUT = ["/", "/runners/", "/admin/", "/admin/scheduler/job/", "/checks/", "/nowhere/"]


@pytest.fixture
def required(settings):
    settings.CRONIQ_REQUIRE_2FA = True


def test_off_a_staff_user_without_an_authenticator_goes_anywhere(client, staff):
    client.force_login(staff)
    assert client.get("/runners/").status_code == 200


def test_on_every_page_sends_a_staff_user_without_one_to_enrol(client, staff, required):
    log_in(client, next_url="/runners/")
    for path in SHUT:
        answer = client.get(path)
        assert answer.status_code == 302, path
        assert answer["Location"] == ENROL, path
    # A POST too: no action goes through.
    assert client.post("/runners/1/drain")["Location"] == ENROL


def test_the_enrolment_page_says_why(client, staff, required):
    log_in(client)
    confirm_password(client)
    page = client.get(ENROL).content.decode()
    assert "data-enrolment-required" in page
    assert "Two-factor sign-in is required for staff here" in page


def test_signing_in_and_out_static_files_and_machines_stay_reachable(client, staff, required):
    client.force_login(staff)
    assert client.get("/accounts/2fa/").status_code == 200
    assert client.get("/accounts/reauthenticate/").status_code == 200
    assert client.get("/favicon.ico").status_code == 200
    assert client.post("/admin/logout/").status_code == 200
    client.force_login(staff)
    assert client.post("/accounts/logout/")["Location"] == "/accounts/login/"


def test_the_management_api_and_static_files_answer_as_ever(client, staff, required):
    client.force_login(staff)
    assert client.get("/api/v1/jobs").status_code == 401  # its own key check
    static = client.get("/static/dashboard/dashboard.css")
    static.close()  # last: closing sends request_finished, which closes the connection
    assert static.status_code == 200


@pytest.mark.parametrize(
    ("path", "reachable"),
    [
        ("/accounts/2fa/totp/activate/", True),
        ("/accounts/logout/", True),
        ("/admin/logout/", True),
        ("/static/dashboard/dashboard.css", True),
        ("/healthz", True),
        ("/metrics", True),
        ("/api/v1/jobs", True),
        ("/ping/a-token", True),
        ("/", False),
        ("/admin/", False),
        ("/admin/auth/user/", False),
        ("/runners/", False),
        ("/accountsx/", False),
    ],
)
def test_what_stays_reachable_before_enrolment(path, reachable):
    assert reachable_without_enrolment(path) is reachable


def test_after_enrolling_the_pages_open(client, staff, required, clock):
    log_in(client)
    confirm_password(client)
    secret = client.get(ENROL).context["form"].secret
    answer = client.post(ENROL, {"code": totp(secret, clock.now)})
    assert answer["Location"] == "/accounts/2fa/recovery-codes/"
    assert client.get("/runners/").status_code == 200


def test_recovery_codes_alone_are_no_authenticator(client, staff, required):
    # What an admin who removed only the TOTP row in the admin leaves.
    from allauth.mfa.recovery_codes.internal.auth import RecoveryCodes

    RecoveryCodes.activate(staff)
    client.force_login(staff)
    assert client.get("/runners/")["Location"] == ENROL


def test_an_enrolled_user_cannot_turn_two_factor_off(client, staff, enrolled, required):
    client.force_login(staff)
    confirm_password(client)
    page = client.get("/accounts/2fa/totp/deactivate/").content.decode()
    assert "data-cannot-deactivate" in page
    assert "CRONIQ_REQUIRE_2FA" in page
    answer = client.post("/accounts/2fa/totp/deactivate/")
    assert answer.status_code == 200
    assert Authenticator.objects.filter(user=staff, type=Authenticator.Type.TOTP).exists()


def test_users_who_are_not_staff_are_not_concerned(client, db, required):
    user = get_user_model().objects.create_user("visitor", password=PASSWORD)
    client.force_login(user)
    assert client.get("/runners/").status_code == 403


def test_a_single_sign_on_session_is_not_held_to_it(client, staff, required):
    client.force_login(staff)
    session = client.session
    session[AUTHENTICATION_METHODS_SESSION_KEY] = [
        {"method": "socialaccount", "at": 0, "provider": "openid_connect", "uid": "ops"}
    ]
    session["account_authentication_methods_user"] = str(staff.pk)
    session.save()
    assert client.get("/runners/").status_code == 200


def test_a_session_signed_in_before_it_was_turned_on_is_held_to_it(client, staff, settings):
    client.force_login(staff)
    assert client.get("/runners/").status_code == 200
    settings.CRONIQ_REQUIRE_2FA = True
    assert client.get("/runners/")["Location"] == ENROL


@pytest.mark.django_db(transaction=True)
def test_under_asgi_too(staff, required):
    async def visit():
        client = AsyncClient()
        await client.aforce_login(staff)
        return await client.get("/runners/"), await client.get("/healthz")

    page, health = asyncio.run(visit())
    assert page.status_code == 302
    assert page["Location"] == ENROL
    assert health.status_code == 200
