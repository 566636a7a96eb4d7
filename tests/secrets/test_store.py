"""The store (docs/design.md §11): values encrypted at rest under the first
key of CRONIQ_SECRETS_KEYS, every key decrypting, every change audited
without its value, and `rotate_secrets` moving values to the first key."""

import datetime as dt
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core import checks
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from vault import crypto, store
from vault.models import Secret

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()
VALUE = "correct-horse-battery-staple"


def put(name="db-password", value=VALUE):
    return store.put(name, value, actor=None, now=NOW)


def test_a_value_is_stored_encrypted_and_read_back(settings):
    settings.CRONIQ_SECRETS_KEYS = [OLD]
    secret, created = put()
    stored = Secret.objects.get(name="db-password").ciphertext
    assert created
    assert VALUE not in stored
    assert Fernet(OLD.encode()).decrypt(stored.encode()).decode() == VALUE
    assert crypto.decrypt(stored) == VALUE


def test_setting_a_known_name_replaces_its_value():
    put()
    secret, created = put(value="another-value")
    assert not created
    assert Secret.objects.count() == 1
    assert crypto.decrypt(Secret.objects.get().ciphertext) == "another-value"


def test_every_change_is_audited_without_the_value():
    put()
    put(value="another-value")
    store.delete(Secret.objects.get(), actor=None, now=NOW)
    events = AuditEvent.objects.order_by("id")
    assert [e.action for e in events] == ["secret.created", "secret.changed", "secret.deleted"]
    for event in events:
        assert event.data == {"project": "default", "name": "db-password"}
        assert VALUE not in str(event.__dict__) and "another-value" not in str(event.__dict__)


@pytest.mark.parametrize(
    ("name", "value", "field"),
    [
        ("has space", VALUE, "name"),
        ("-leading", VALUE, "name"),
        ("fine", "", "value"),
        ("fine", "a\x00b", "value"),
        ("fine", "x" * (store.LONGEST_VALUE + 1), "value"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_stores_nothing(name, value, field):
    with pytest.raises(ValidationError) as refused:
        put(name, value)
    assert field in refused.value.message_dict
    assert not Secret.objects.exists()
    assert not AuditEvent.objects.exists()


def test_the_first_key_encrypts_and_every_key_decrypts(settings):
    settings.CRONIQ_SECRETS_KEYS = [OLD]
    put()
    settings.CRONIQ_SECRETS_KEYS = [NEW, OLD]
    put("api-token", "tok-abcdef")
    old_row, new_row = (Secret.objects.get(name=n).ciphertext for n in ("db-password", "api-token"))
    assert crypto.decrypt(old_row) == VALUE  # written under OLD, still read
    assert Fernet(NEW.encode()).decrypt(new_row.encode()) == b"tok-abcdef"


def test_rotate_secrets_moves_every_value_under_the_first_key(settings):
    settings.CRONIQ_SECRETS_KEYS = [OLD]
    put()
    put("api-token", "tok-abcdef")
    settings.CRONIQ_SECRETS_KEYS = [NEW, OLD]
    out = StringIO()
    call_command("rotate_secrets", stdout=out)
    assert "rotated 2 secret(s)" in out.getvalue()
    settings.CRONIQ_SECRETS_KEYS = [NEW]  # the old key retired: nothing lost
    values = {s.name: crypto.decrypt(s.ciphertext) for s in Secret.objects.all()}
    assert values == {"db-password": VALUE, "api-token": "tok-abcdef"}
    rotated = AuditEvent.objects.get(action="secrets.rotated")
    assert rotated.data == {"rotated": 2, "unreadable": []}
    # Idempotent: a second run changes no value.
    call_command("rotate_secrets", stdout=StringIO())
    assert {s.name: crypto.decrypt(s.ciphertext) for s in Secret.objects.all()} == values


def test_rotate_secrets_names_what_no_key_decrypts_and_leaves_it(settings):
    settings.CRONIQ_SECRETS_KEYS = [OLD]
    put()
    before = Secret.objects.get().ciphertext
    settings.CRONIQ_SECRETS_KEYS = [NEW]  # OLD lost
    with pytest.raises(CommandError, match="db-password"):
        call_command("rotate_secrets", stdout=StringIO())
    assert Secret.objects.get().ciphertext == before


def test_without_keys_a_key_derived_from_secret_key_encrypts_and_stays_readable(settings):
    settings.CRONIQ_SECRETS_KEYS = []
    put()
    stored = Secret.objects.get().ciphertext
    derived = crypto.derived_key(settings.SECRET_KEY)
    assert Fernet(derived).decrypt(stored.encode()).decode() == VALUE
    # Keys set later: the derived key still decrypts what it wrote.
    settings.CRONIQ_SECRETS_KEYS = [NEW]
    assert crypto.decrypt(stored) == VALUE
    assert derived.decode() != settings.SECRET_KEY


def test_a_malformed_key_is_named_by_its_position(settings):
    settings.CRONIQ_SECRETS_KEYS = [NEW, "not-a-key"]
    with pytest.raises(ImproperlyConfigured, match="key 2 is not a Fernet key"):
        crypto.encrypt("x")
    errors = [m for m in checks.run_checks() if m.id == "croniq.E201"]
    assert len(errors) == 1 and "key 2" in errors[0].msg
    assert "not-a-key" not in errors[0].msg  # a key is never printed


def test_the_deploy_check_warns_while_no_key_is_set(settings):
    settings.CRONIQ_SECRETS_KEYS = []
    assert "croniq.W201" in {m.id for m in checks.run_checks(include_deployment_checks=True)}
    settings.CRONIQ_SECRETS_KEYS = [NEW]
    assert "croniq.W201" not in {m.id for m in checks.run_checks(include_deployment_checks=True)}


def test_new_key_prints_a_usable_key_and_changes_nothing():
    put()
    before = Secret.objects.get().ciphertext
    out = StringIO()
    call_command("rotate_secrets", "--new-key", stdout=out)
    Fernet(out.getvalue().strip().encode())  # a valid key
    assert Secret.objects.get().ciphertext == before
