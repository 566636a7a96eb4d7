"""Two-factor sign-in (docs/design.md §11): TOTP after the password, a
recovery code in its place, once each; the code step cannot be skipped; a
user enrols and turns off only their own authenticator."""

import pytest
from allauth.mfa.models import Authenticator
from django.contrib.auth import get_user_model

from tests.sign_in.conftest import (
    NOW,
    PASSWORD,
    SECRET,
    confirm_password,
    give_code,
    log_in,
    signed_in,
)
from tests.totp import STEP, totp

pytestmark = pytest.mark.django_db


def test_the_password_alone_does_not_sign_in_a_user_with_an_authenticator(client, enrolled):
    answer = log_in(client, next_url="/runners/")
    assert answer["Location"] == "/accounts/2fa/authenticate/"
    assert not signed_in(client)
    page = client.get("/accounts/2fa/authenticate/").content.decode()
    assert 'name="code"' in page
    assert 'autocomplete="one-time-code"' in page


def test_the_code_step_cannot_be_skipped(client, enrolled):
    log_in(client, next_url="/runners/")
    for path in ("/runners/", "/", "/admin/", "/admin/scheduler/job/", "/accounts/2fa/"):
        answer = client.get(path)
        assert answer.status_code == 302, path
        assert "/login/" in answer["Location"], path
    assert not signed_in(client)


def test_the_right_code_signs_in_and_goes_where_the_user_was_going(client, enrolled, clock):
    log_in(client, next_url="/runners/")
    answer = give_code(client, totp(SECRET, NOW))
    assert answer["Location"] == "/runners/"
    assert signed_in(client)
    assert client.get("/runners/").status_code == 200


def test_a_code_of_the_step_before_or_after_is_accepted(client, enrolled, clock):
    # One 30-second step of tolerance each way (MFA_TOTP_TOLERANCE).
    log_in(client)
    give_code(client, totp(SECRET, NOW - STEP))
    assert signed_in(client)


@pytest.mark.parametrize("offset", [-2 * STEP, 2 * STEP])
def test_a_code_two_steps_away_is_refused(client, enrolled, clock, offset):
    log_in(client)
    answer = give_code(client, totp(SECRET, NOW + offset))
    assert answer.status_code == 200
    assert "Incorrect code." in answer.content.decode()
    assert not signed_in(client)


def test_a_wrong_code_is_refused_and_the_right_one_still_works(client, enrolled, clock):
    log_in(client)
    right = totp(SECRET, NOW)
    wrong = f"{(int(right) + 1) % 1_000_000:06d}"
    assert "Incorrect code." in give_code(client, wrong).content.decode()
    assert not signed_in(client)
    give_code(client, right)
    assert signed_in(client)


def test_a_code_signs_in_once(client, enrolled, clock):
    code = totp(SECRET, NOW)
    log_in(client)
    give_code(client, code)
    assert signed_in(client)
    client.post("/accounts/logout/")
    log_in(client)
    # The same code again, still within its step: someone who saw it typed.
    answer = give_code(client, code)
    assert "Incorrect code." in answer.content.decode()
    assert not signed_in(client)


def test_a_recovery_code_signs_in_once(client, enrolled):
    log_in(client)
    give_code(client, enrolled[0])
    assert signed_in(client)
    client.post("/accounts/logout/")
    log_in(client)
    assert "Incorrect code." in give_code(client, enrolled[0]).content.decode()
    assert not signed_in(client)
    give_code(client, enrolled[1])
    assert signed_in(client)
    codes = Authenticator.objects.get(type=Authenticator.Type.RECOVERY_CODES).wrap()
    assert codes.get_unused_codes() == enrolled[2:]


def test_the_admin_asks_for_the_code_too(client, enrolled, clock):
    client.get("/admin/login/?next=/admin/")
    log_in(client, next_url="/admin/")
    assert client.get("/admin/")["Location"].startswith("/admin/login/")
    assert give_code(client, totp(SECRET, NOW))["Location"] == "/admin/"


def enrol(client, clock):
    """Open the enrolment page and turn TOTP on with the secret it shows."""
    page = client.get("/accounts/2fa/totp/activate/")
    secret = page.context["form"].secret
    return (
        page,
        secret,
        client.post("/accounts/2fa/totp/activate/", {"code": totp(secret, clock.now)}),
    )


def test_a_user_enrols_with_the_qr_code_or_the_secret_and_gets_recovery_codes(client, staff, clock):
    log_in(client)
    # The page asks for the password again, then opens.
    assert client.get("/accounts/2fa/totp/activate/")["Location"].startswith(
        "/accounts/reauthenticate/?next="
    )
    confirm_password(client)
    page, secret, answer = enrol(client, clock)
    html = page.content.decode()
    assert 'src="data:image/svg+xml;base64,' in html
    assert f"<code data-totp-secret>{secret}</code>" in html
    assert "otpauth://totp/ops?secret=" in page.context["totp_url"]
    assert "issuer=Croniq" in page.context["totp_url"]
    assert answer["Location"] == "/accounts/2fa/recovery-codes/"
    [totp_row] = Authenticator.objects.filter(user=staff, type=Authenticator.Type.TOTP)
    codes = client.get("/accounts/2fa/recovery-codes/")
    shown = codes.context["unused_codes"]
    assert len(shown) == 10
    assert all(f"<code>{code}</code>" in codes.content.decode() for code in shown)


def test_enrolment_refuses_a_wrong_code(client, staff, clock):
    log_in(client)
    confirm_password(client)
    client.get("/accounts/2fa/totp/activate/")
    answer = client.post("/accounts/2fa/totp/activate/", {"code": "000000"})
    assert answer.status_code == 200
    assert "Incorrect code." in answer.content.decode()
    assert not Authenticator.objects.filter(user=staff).exists()


def test_a_user_turns_off_their_own_authenticator(client, staff, enrolled):
    client.force_login(staff)
    # force_login records no sign-in: the page asks for the password first.
    answer = client.post("/accounts/2fa/totp/deactivate/")
    assert answer["Location"].startswith("/accounts/reauthenticate/")
    confirm_password(client)
    answer = client.post("/accounts/2fa/totp/deactivate/")
    assert answer["Location"] == "/accounts/2fa/"
    assert not Authenticator.objects.filter(user=staff).exists()


def test_nobody_enrols_or_turns_off_another_users_authenticator(client, staff, enrolled, clock):
    other = get_user_model().objects.create_user("other", password=PASSWORD, is_staff=True)
    log_in(client, username="other")
    confirm_password(client)
    # The pages act on the signed-in user alone: no user or authenticator is
    # named in a URL or a field, and one naming them is not listened to.
    target = Authenticator.objects.get(user=staff, type=Authenticator.Type.TOTP)
    data = {"user": staff.pk, "authenticator": target.pk, "id": target.pk}
    assert client.post("/accounts/2fa/totp/deactivate/", data).status_code == 404
    assert client.get(f"/accounts/2fa/totp/deactivate/?id={target.pk}").status_code == 404
    enrol(client, clock)
    assert Authenticator.objects.filter(user=staff).count() == 2
    assert Authenticator.objects.filter(user=other).count() == 2
    assert Authenticator.objects.get(pk=target.pk).wrap().instance.data == target.data
    # Other's recovery codes are other's: staff's still sign staff in.
    shown = client.get("/accounts/2fa/recovery-codes/").context["unused_codes"]
    assert not set(shown) & set(enrolled)


def test_the_two_factor_pages_need_a_signed_in_user(client):
    for path in (
        "/accounts/2fa/",
        "/accounts/2fa/totp/activate/",
        "/accounts/2fa/totp/deactivate/",
        "/accounts/2fa/recovery-codes/",
        "/accounts/2fa/recovery-codes/generate/",
    ):
        answer = client.get(path)
        assert answer.status_code == 302, path
        assert answer["Location"].startswith("/accounts/login/"), path


def test_cancelling_the_code_step_forgets_the_password_step(client, enrolled):
    log_in(client)
    assert client.get("/accounts/login/")["Location"] == "/accounts/2fa/authenticate/"
    client.post("/accounts/logout/", {"next": "/accounts/login/"})
    assert client.get("/accounts/login/").status_code == 200
    assert client.get("/accounts/2fa/authenticate/")["Location"] == "/accounts/login/"
    assert not signed_in(client)


def actions(user):
    from audit.models import AuditEvent

    events = AuditEvent.objects.filter(target_id=str(user.pk)).order_by("pk")
    return [(e.action, e.actor_name, e.data) for e in events]


def test_two_factor_changes_and_recovery_codes_used_are_audited(
    client, staff, clock, django_capture_on_commit_callbacks
):
    log_in(client)
    confirm_password(client)
    # allauth tells of a new authenticator and new codes once committed.
    with django_capture_on_commit_callbacks(execute=True):
        enrol(client, clock)
        client.post("/accounts/2fa/recovery-codes/generate/")
    codes = client.get("/accounts/2fa/recovery-codes/").context["unused_codes"]
    client.post("/accounts/2fa/totp/deactivate/")
    assert actions(staff) == [
        ("user.two_factor_on", "ops", {"type": "totp"}),
        ("user.recovery_codes_renewed", "ops", {"type": "recovery_codes"}),
        ("user.two_factor_off", "ops", {"type": "totp"}),
    ]
    assert not any(code in str(actions(staff)) for code in codes)


def test_a_recovery_code_used_is_audited(client, enrolled, staff):
    log_in(client)
    give_code(client, enrolled[0])
    assert actions(staff) == [("user.recovery_code_used", "ops", {"type": "recovery_codes"})]
    assert enrolled[0] not in str(actions(staff))
