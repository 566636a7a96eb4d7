"""Failed sign-ins are rate-limited (allauth's `login_failed`, settings
ACCOUNT_RATE_LIMITS): 5 in 5 minutes for one username, 10 a minute from
one address; then the login is refused with a message saying so, even
with the right password, until the window has passed."""

import time
from types import SimpleNamespace

import pytest
from allauth.core.internal import ratelimit
from django.contrib.auth import get_user_model

from tests.sign_in.conftest import NOW, PASSWORD, SECRET, give_code, log_in, signed_in
from tests.totp import totp

pytestmark = pytest.mark.django_db

REFUSED = "Too many failed sign-in attempts for this username or from this address"


@pytest.fixture
def limiter_clock(monkeypatch):
    """The rate limiter's clock: `limiter_clock.now`."""
    clock = SimpleNamespace(now=NOW)
    fake = SimpleNamespace(time=lambda: clock.now, monotonic=time.monotonic, sleep=time.sleep)
    monkeypatch.setattr(ratelimit, "time", fake)
    return clock


def fail(client, times, username="ops", **extra):
    for _ in range(times):
        answer = log_in(client, username=username, password="wrong", **extra)
        assert REFUSED not in answer.content.decode()


def test_after_five_failures_the_right_password_is_refused_saying_why(client, staff):
    fail(client, 5)
    answer = log_in(client)
    assert answer.status_code == 200
    assert REFUSED in answer.content.decode()
    assert not signed_in(client)


def test_four_failures_leave_the_right_password_working(client, staff):
    fail(client, 4)
    log_in(client)
    assert signed_in(client)


def test_the_limit_ends_when_its_window_has_passed(client, staff, limiter_clock):
    fail(client, 5)
    limiter_clock.now += 4 * 60
    assert REFUSED in log_in(client).content.decode()
    limiter_clock.now += 61
    log_in(client)
    assert signed_in(client)


def test_the_count_is_per_username_whatever_the_host_header_names(client, staff):
    # allauth's own key starts with the Host, port included: a port per try
    # would have started a fresh count each time.
    for port in range(1, 6):
        log_in(client, password="wrong", HTTP_HOST=f"testserver:{port}")
    assert REFUSED in log_in(client, HTTP_HOST="testserver:6").content.decode()
    assert not signed_in(client)


def test_another_username_is_not_held_back_by_one_users_failures(client, staff):
    get_user_model().objects.create_user("other", password=PASSWORD, is_staff=True)
    fail(client, 5)
    log_in(client, username="other")
    assert signed_in(client)


def test_ten_failures_from_one_address_hold_back_every_username_from_it(client, staff):
    for n in range(10):
        log_in(client, username=f"guess-{n}", password="wrong", REMOTE_ADDR="203.0.113.7")
    answer = log_in(client, REMOTE_ADDR="203.0.113.7")
    assert REFUSED in answer.content.decode()
    log_in(client, REMOTE_ADDR="198.51.100.1")
    assert signed_in(client)


def test_wrong_two_factor_codes_count_too(client, enrolled, clock):
    log_in(client)
    for _ in range(5):
        assert "Incorrect code." in give_code(client, "000000").content.decode()
    answer = give_code(client, totp(SECRET, NOW))
    assert REFUSED in answer.content.decode()
    assert not signed_in(client)


def test_thirty_logins_a_minute_from_one_address_then_a_429_page(client, staff):
    for n in range(30):
        assert log_in(client, username=f"user-{n}", password="x").status_code == 200
    answer = log_in(client)
    assert answer.status_code == 429
    assert "Too many attempts from this address" in answer.content.decode()
    assert not signed_in(client)
