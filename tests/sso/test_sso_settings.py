"""Single sign-on's settings (croniq_project/sso_settings.py): the
CRONIQ_OIDC_* variables, allauth's provider made from them, and the
system checks croniq.E202 and croniq.E203."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from croniq_project import sso_settings

VARIABLES = [
    "CRONIQ_OIDC_ISSUER",
    "CRONIQ_OIDC_CLIENT_ID",
    "CRONIQ_OIDC_CLIENT_SECRET",
    "CRONIQ_OIDC_CLIENT_SECRET_FILE",
    "CRONIQ_OIDC_ROLES_CLAIM",
    "CRONIQ_OIDC_ONLY",
]


@pytest.fixture
def environ(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_unset_nothing_is_configured(environ):
    oidc = sso_settings.from_env()
    assert oidc == sso_settings.OIDC(None, None, None, "groups", False)
    assert not oidc.configured
    assert sso_settings.providers(oidc) == {}


def test_the_provider_is_made_from_the_variables_with_pkce(environ):
    environ.setenv("CRONIQ_OIDC_ISSUER", " https://auth.example/application/o/croniq/ ")
    environ.setenv("CRONIQ_OIDC_CLIENT_ID", "croniq")
    environ.setenv("CRONIQ_OIDC_CLIENT_SECRET", "s3cret")
    environ.setenv("CRONIQ_OIDC_ROLES_CLAIM", "roles")
    environ.setenv("CRONIQ_OIDC_ONLY", "true")
    oidc = sso_settings.from_env()
    assert oidc.roles_claim == "roles" and oidc.only
    provider = sso_settings.providers(oidc)["openid_connect"]
    assert provider["OAUTH_PKCE_ENABLED"] is True
    (app,) = provider["APPS"]
    assert app["provider_id"] == "sso"
    assert (app["client_id"], app["secret"]) == ("croniq", "s3cret")
    # allauth appends /.well-known/openid-configuration itself.
    assert app["settings"]["server_url"] == "https://auth.example/application/o/croniq"


def test_the_secret_may_come_from_a_file(environ, tmp_path):
    secret = tmp_path / "oidc-secret"
    secret.write_text("from-a-file\n")
    environ.setenv("CRONIQ_OIDC_CLIENT_SECRET", "ignored")
    environ.setenv("CRONIQ_OIDC_CLIENT_SECRET_FILE", str(secret))
    assert sso_settings.from_env().client_secret == "from-a-file"


def test_an_unreadable_secret_file_names_the_variable(environ, tmp_path):
    environ.setenv("CRONIQ_OIDC_CLIENT_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="CRONIQ_OIDC_CLIENT_SECRET_FILE: cannot read"):
        sso_settings.from_env()


def test_a_malformed_only_names_the_variable(environ):
    environ.setenv("CRONIQ_OIDC_ONLY", "sometimes")
    with pytest.raises(ImproperlyConfigured, match="CRONIQ_OIDC_ONLY: expected a boolean"):
        sso_settings.from_env()


def configure(settings, issuer=None, client_id=None, secret=None, only=False):
    settings.CRONIQ_OIDC_ISSUER = issuer
    settings.CRONIQ_OIDC_CLIENT_ID = client_id
    settings.CRONIQ_OIDC_CLIENT_SECRET = secret
    settings.CRONIQ_OIDC_ONLY = only


def test_the_check_passes_unset_or_complete(settings):
    configure(settings)
    assert sso_settings.incomplete() == []
    configure(settings, "https://idp.example", "croniq", "s")
    assert sso_settings.incomplete() == []


def test_the_check_names_what_an_issuer_lacks(settings):
    configure(settings, "https://idp.example")
    (error,) = sso_settings.incomplete()
    assert error.id == "croniq.E202"
    assert "CRONIQ_OIDC_CLIENT_ID and CRONIQ_OIDC_CLIENT_SECRET are not" in error.msg
    configure(settings, "https://idp.example", "croniq")
    (error,) = sso_settings.incomplete()
    assert "but CRONIQ_OIDC_CLIENT_SECRET is not" in error.msg
    assert "CRONIQ_OIDC_CLIENT_SECRET_FILE" in error.hint


def test_the_check_refuses_oidc_only_without_sso(settings):
    configure(settings, only=True)
    (error,) = sso_settings.incomplete()
    assert error.id == "croniq.E203"
    assert "only superusers could sign in" in error.msg


def test_the_check_is_registered(settings):
    from django.core import checks

    configure(settings, "https://idp.example")
    ids = [message.id for message in checks.run_checks(tags=[checks.Tags.security])]
    assert "croniq.E202" in ids
