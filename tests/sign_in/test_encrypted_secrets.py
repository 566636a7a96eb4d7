"""Two-factor secrets at rest (docs/design.md §11): the TOTP secret and the
recovery codes' seed are stored encrypted under CRONIQ_SECRETS_KEYS, move
to a new first key with `rotate_secrets`, and one no key decrypts refuses the
sign-in with a message, never a 500."""

import json
from io import StringIO

import pytest
from allauth.mfa.models import Authenticator
from allauth.mfa.recovery_codes.internal.auth import RecoveryCodes
from allauth.mfa.totp.internal import auth as totp_auth
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from croniq_project.sign_in import UNREADABLE_SECRET
from tests.sign_in.conftest import NOW, SECRET, confirm_password, give_code, log_in, signed_in
from tests.totp import STEP, totp

pytestmark = pytest.mark.django_db

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


@pytest.fixture
def codes(settings, staff):
    """`staff` enrolled (SECRET and recovery codes) under the key OLD alone:
    the recovery codes."""
    settings.CRONIQ_SECRETS_KEYS = [OLD]
    totp_auth.TOTP.activate(staff, SECRET)
    return RecoveryCodes.activate(staff).generate_codes()


def stored():
    """{type: data} as the database holds them, read past allauth."""
    return dict(Authenticator.objects.values_list("type", "data"))


def decrypted(key, token):
    return Fernet(key.encode()).decrypt(token.encode()).decode()


def sign_in(client, code):
    log_in(client)
    answer = give_code(client, code)
    return answer, signed_in(client)


def test_the_secret_and_the_seed_are_stored_encrypted(codes):
    rows = stored()
    assert SECRET not in json.dumps(rows)
    assert decrypted(OLD, rows["totp"]["secret"]) == SECRET
    seed = decrypted(OLD, rows["recovery_codes"]["seed"])
    assert len(seed) == 80 and seed not in json.dumps(rows)
    assert rows["recovery_codes"]["used_mask"] == 0  # allauth's own, unencrypted


def test_a_secret_enrolled_on_the_page_is_stored_encrypted(client, settings, staff, clock):
    settings.CRONIQ_SECRETS_KEYS = [OLD]
    log_in(client)
    confirm_password(client)
    secret = client.get("/accounts/2fa/totp/activate/").context["form"].secret
    client.post("/accounts/2fa/totp/activate/", {"code": totp(secret, clock.now)})
    rows = stored()
    assert secret not in json.dumps(rows)
    assert decrypted(OLD, rows["totp"]["secret"]) == secret


def test_a_code_and_a_recovery_code_still_sign_in(client, codes, clock):
    assert sign_in(client, totp(SECRET, NOW))[1]
    client.post("/accounts/logout/")
    assert sign_in(client, codes[0])[1]


def test_after_a_new_first_key_codes_verify_and_rotate_secrets_moves_them(
    client, settings, codes, clock
):
    settings.CRONIQ_SECRETS_KEYS = [NEW, OLD]
    before = stored()
    assert sign_in(client, totp(SECRET, NOW))[1]
    client.post("/accounts/logout/")

    out = StringIO()
    call_command("rotate_secrets", stdout=out)
    assert "rotated 2 two-factor authenticator(s) under the first key" in out.getvalue()
    after = stored()
    assert decrypted(NEW, after["totp"]["secret"]) == SECRET
    assert decrypted(NEW, after["recovery_codes"]["seed"]) == decrypted(
        OLD, before["recovery_codes"]["seed"]
    )
    assert AuditEvent.objects.get(action="authenticators.rotated").data == {
        "rotated": 2,
        "unreadable": [],
    }

    settings.CRONIQ_SECRETS_KEYS = [NEW]  # the old key retired: nothing lost
    clock.now = NOW + 2 * STEP  # the first code is spent
    assert sign_in(client, totp(SECRET, clock.now))[1]
    client.post("/accounts/logout/")
    assert sign_in(client, codes[1])[1]


def test_rotation_keeps_a_recovery_code_used_meanwhile_used(client, settings, codes):
    # The rotation writes the row it locked and read: used_mask comes along.
    assert sign_in(client, codes[0])[1]
    settings.CRONIQ_SECRETS_KEYS = [NEW, OLD]
    call_command("rotate_secrets", stdout=StringIO())
    assert stored()["recovery_codes"]["used_mask"] == 1
    assert Authenticator.objects.get(type="recovery_codes").wrap().get_unused_codes() == codes[1:]


def test_with_the_key_gone_the_sign_in_is_refused_saying_why(client, settings, codes, clock):
    settings.CRONIQ_SECRETS_KEYS = [NEW]  # OLD, which encrypted them, lost
    for code in (totp(SECRET, NOW), codes[0]):
        answer, is_signed_in = sign_in(client, code)
        assert answer.status_code == 200
        assert UNREADABLE_SECRET in answer.content.decode()
        assert not is_signed_in


def test_with_the_key_gone_the_two_factor_pages_say_why(client, settings, codes, staff):
    settings.CRONIQ_SECRETS_KEYS = [NEW]
    client.force_login(staff)  # a session signed in before the key was removed
    confirm_password(client)  # the codes' page asks for it
    for path in ("/accounts/2fa/", "/accounts/2fa/recovery-codes/"):
        answer = client.get(path)
        assert answer.status_code == 503, path
        assert UNREADABLE_SECRET in answer.content.decode(), path


def test_rotate_secrets_names_the_authenticators_no_key_decrypts_and_leaves_them(
    settings, codes, staff
):
    before = stored()
    settings.CRONIQ_SECRETS_KEYS = [NEW]
    with pytest.raises(CommandError) as refused:
        call_command("rotate_secrets", stdout=StringIO())
    totp_row = Authenticator.objects.get(type="totp")
    codes_row = Authenticator.objects.get(type="recovery_codes")
    assert f"ops (totp, authenticator {totp_row.pk})" in str(refused.value)
    assert f"ops (recovery_codes, authenticator {codes_row.pk})" in str(refused.value)
    assert SECRET not in str(refused.value)
    assert stored() == before


def test_a_secret_stored_in_clear_is_not_trusted(client, settings, staff, clock):
    # What allauth stored before Croniq encrypted (never released): refused
    # like one no key decrypts, and named by rotate_secrets.
    Authenticator.objects.create(user=staff, type="totp", data={"secret": SECRET})
    answer, is_signed_in = sign_in(client, totp(SECRET, NOW))
    assert UNREADABLE_SECRET in answer.content.decode()
    assert not is_signed_in
    with pytest.raises(CommandError, match=r"ops \(totp, authenticator"):
        call_command("rotate_secrets", stdout=StringIO())
