"""Users, their authenticators and a fixed clock for the sign-in tests."""

from types import SimpleNamespace

import pytest
from allauth.mfa.recovery_codes.internal.auth import RecoveryCodes
from allauth.mfa.totp.internal import auth as totp_auth
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

PASSWORD = "correct horse battery"
SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
# A fixed instant, in the middle of its 30-second step.
NOW = 1_796_000_015.0


@pytest.fixture
def clock(monkeypatch):
    """allauth's TOTP checks read the time from this clock: `clock.now`."""
    clock = SimpleNamespace(now=NOW)
    monkeypatch.setattr(totp_auth, "time", SimpleNamespace(time=lambda: clock.now))
    return clock


@pytest.fixture
def staff(db):
    """A staff user who may read the runners page (/runners/)."""
    user = get_user_model().objects.create_user("ops", password=PASSWORD, is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_runner"))
    return user


@pytest.fixture
def enrolled(staff):
    """`staff` with a TOTP authenticator of SECRET and recovery codes: the codes."""
    totp_auth.TOTP.activate(staff, SECRET)
    return RecoveryCodes.activate(staff).generate_codes()


def log_in(client, username="ops", password=PASSWORD, next_url=None, **extra):
    url = "/accounts/login/" + (f"?next={next_url}" if next_url else "")
    return client.post(url, {"username": username, "password": password}, **extra)


def give_code(client, code):
    return client.post("/accounts/2fa/authenticate/", {"code": code})


def signed_in(client):
    """Whether the client's session is signed in: the dashboard's user
    check, not a page's permissions."""
    return "_auth_user_id" in client.session


def confirm_password(client, password=PASSWORD):
    """Changing two-factor asks for the password again (allauth counts only a
    reauthentication, not the login, for 5 minutes)."""
    answer = client.post("/accounts/reauthenticate/", {"password": password})
    assert answer.status_code == 302, answer.content.decode()
    return answer
