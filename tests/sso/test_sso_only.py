"""CRONIQ_OIDC_ONLY (croniq_project/sign_in.py): the password signs in
superusers alone, the others are told to use SSO; the page folds the
password form away for the superusers' break-glass."""

import pytest
from django.contrib.auth import get_user_model

from tests.sign_in.conftest import PASSWORD, log_in, signed_in
from tests.sso.conftest import sso_login

pytestmark = pytest.mark.django_db


@pytest.fixture
def only(oidc, settings):
    settings.CRONIQ_OIDC_ONLY = True
    return oidc


def test_a_staff_user_s_password_is_refused_saying_to_use_sso(client, only, staff):
    answer = log_in(client)
    assert answer.status_code == 200
    assert "Sign in with SSO: password sign-in is for superusers only" in answer.content.decode()
    assert not signed_in(client)


def test_a_wrong_password_is_still_a_wrong_password(client, only, staff):
    answer = log_in(client, password="wrong")
    assert "Enter the username and password of a staff account" in answer.content.decode()


def test_a_superuser_signs_in_with_the_password(client, only):
    get_user_model().objects.create_superuser("root", password=PASSWORD)
    answer = log_in(client, username="root")
    assert answer.status_code == 302
    assert signed_in(client)


def test_off_a_staff_user_s_password_signs_in(client, oidc, staff):
    assert log_in(client).status_code == 302


def test_the_page_folds_the_password_form_under_superuser_sign_in(client, only, staff):
    page = client.get("/accounts/login/").content.decode()
    assert page.index('value="Sign in with SSO"') < page.index("<details data-break-glass>")
    assert "Superuser sign-in (password)" in page
    # A refused password opens it, showing why.
    refused = log_in(client).content.decode()
    assert "<details data-break-glass open>" in refused


def test_sso_still_signs_in(client, only):
    sso_login(
        client,
        only,
        {"sub": "u-1", "preferred_username": "alice", "groups": "croniq:default:viewer"},
    )
    assert signed_in(client)
