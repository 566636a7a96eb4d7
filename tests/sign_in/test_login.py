"""The login page (allauth's, croniq_project/sign_in.py) for users without
two-factor: the dashboard and the admin send people to it, it takes a
username and a password as the admin's login did, and only staff sign in."""

import pytest
from django.contrib.auth import get_user_model

from tests.sign_in.conftest import PASSWORD, log_in, signed_in

pytestmark = pytest.mark.django_db


def test_the_dashboard_and_the_admin_send_people_to_the_login_page(client):
    assert client.get("/runners/")["Location"] == "/accounts/login/?next=/runners/"
    # The admin's own login page goes there too, keeping where to go next.
    answer = client.get("/admin/login/?next=/admin/scheduler/job/")
    assert answer.status_code == 302
    assert answer["Location"] == "/accounts/login/?next=%2Fadmin%2Fscheduler%2Fjob%2F"
    assert client.get("/admin/")["Location"].startswith("/admin/login/")


def test_the_page_asks_for_a_username_and_a_password_in_the_admin_layout(client):
    page = client.get("/accounts/login/?next=/runners/").content.decode()
    assert 'name="username"' in page
    assert 'autocomplete="username"' in page
    assert 'name="password"' in page
    assert 'id="login-form"' in page
    assert "admin/css/login.css" in page
    assert '<input type="hidden" name="next" value="/runners/">' in page
    assert 'type="submit"' in page


def test_a_staff_user_without_two_factor_signs_in_with_the_password(client, staff):
    answer = log_in(client, next_url="/runners/")
    assert answer.status_code == 302
    assert answer["Location"] == "/runners/"
    assert signed_in(client)
    # No "Successfully signed in" message waits on the next page.
    page = client.get("/runners/")
    assert page.status_code == 200
    assert "Successfully" not in page.content.decode()


def test_without_next_the_login_goes_to_the_dashboard(client, staff):
    assert log_in(client)["Location"] == "/"


def test_a_wrong_password_is_refused_naming_what_to_enter(client, staff):
    answer = log_in(client, password="wrong")
    assert answer.status_code == 200
    assert "Enter the username and password of a staff account" in answer.content.decode()
    assert not signed_in(client)


def test_a_user_who_is_not_staff_is_refused_as_a_wrong_password_is(client, db):
    get_user_model().objects.create_user("visitor", password=PASSWORD)
    answer = log_in(client, username="visitor")
    assert answer.status_code == 200
    assert "Enter the username and password of a staff account" in answer.content.decode()
    assert not signed_in(client)


def test_an_inactive_user_is_not_signed_in(client, staff):
    staff.is_active = False
    staff.save()
    log_in(client)
    assert not signed_in(client)


def test_usernames_match_exactly_as_before(client, staff):
    log_in(client, username="OPS")
    assert not signed_in(client)


def test_nobody_signs_up_or_resets_a_password_by_email(client):
    for path in ("/accounts/signup/", "/accounts/password/reset/", "/accounts/email/"):
        assert client.get(path).status_code == 404, path


def test_the_login_takes_no_next_outside_croniq(client, staff):
    assert log_in(client, next_url="https://evil.example/")["Location"] == "/"


def test_logging_out_goes_back_to_the_login_page(client, staff):
    client.force_login(staff)
    answer = client.post("/accounts/logout/")
    assert answer["Location"] == "/accounts/login/"
    assert not signed_in(client)


def test_the_dashboard_and_the_admin_link_to_two_factor(client, staff):
    client.force_login(staff)
    assert 'href="/accounts/2fa/" data-two-factor' in client.get("/runners/").content.decode()
    staff.is_superuser = True
    staff.save()
    assert 'href="/accounts/2fa/"' in client.get("/admin/").content.decode()


def test_signing_in_from_the_admins_login_page_lands_in_the_admin(client, staff):
    client.get("/admin/login/")
    answer = log_in(client, next_url="/admin/login/")
    assert client.get(answer["Location"])["Location"] == "/admin/"
