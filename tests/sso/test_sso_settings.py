"""Single sign-on's settings (croniq_project/sso_settings.py): the
CRONIQ_OIDC_* variables, allauth's provider made from them, and the
system checks croniq.E202 and croniq.E203."""

import json
import os
import subprocess
import sys
from pathlib import Path

from croniq_project import sso_settings

ROOT = Path(__file__).resolve().parents[2]

VARIABLES = [
    "CRONIQ_OIDC_ISSUER",
    "CRONIQ_OIDC_CLIENT_ID",
    "CRONIQ_OIDC_CLIENT_SECRET",
    "CRONIQ_OIDC_CLIENT_SECRET_FILE",
    "CRONIQ_OIDC_ROLES_CLAIM",
    "CRONIQ_OIDC_ONLY",
]


def settings_with(**environ):
    """SOCIALACCOUNT_PROVIDERS and the CRONIQ_OIDC_* settings as
    croniq_project/settings.py makes them from `environ`, in a fresh
    process: (returncode, the settings or the error's last line)."""
    env = {k: v for k, v in os.environ.items() if k.split("_FILE")[0] not in VARIABLES}
    env.update(environ, DJANGO_SETTINGS_MODULE="croniq_project.settings")
    result = subprocess.run(
        [sys.executable, "-c", SHOW],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode:
        return result.returncode, result.stderr.strip().splitlines()[-1]
    return 0, json.loads(result.stdout)


SHOW = """
import json
from croniq_project import settings as s
print(json.dumps({name: getattr(s, name) for name in dir(s) if name.startswith(
    ("CRONIQ_OIDC_", "SOCIALACCOUNT_PROVIDERS"))}))
"""


def test_unset_nothing_is_configured():
    code, values = settings_with()
    assert code == 0
    assert values == {
        "CRONIQ_OIDC_ISSUER": None,
        "CRONIQ_OIDC_CLIENT_ID": None,
        "CRONIQ_OIDC_CLIENT_SECRET": None,
        "CRONIQ_OIDC_ROLES_CLAIM": "groups",
        "CRONIQ_OIDC_ONLY": False,
        "SOCIALACCOUNT_PROVIDERS": {},
    }


def test_the_provider_is_made_from_the_variables_with_pkce():
    code, values = settings_with(
        CRONIQ_OIDC_ISSUER=" https://auth.example/application/o/croniq/ ",
        CRONIQ_OIDC_CLIENT_ID="croniq",
        CRONIQ_OIDC_CLIENT_SECRET="s3cret",
        CRONIQ_OIDC_ROLES_CLAIM="roles",
        CRONIQ_OIDC_ONLY="true",
    )
    assert code == 0
    assert values["CRONIQ_OIDC_ROLES_CLAIM"] == "roles"
    assert values["CRONIQ_OIDC_ONLY"] is True
    provider = values["SOCIALACCOUNT_PROVIDERS"]["openid_connect"]
    assert provider["OAUTH_PKCE_ENABLED"] is True
    (app,) = provider["APPS"]
    assert app["provider_id"] == "sso"
    assert (app["client_id"], app["secret"]) == ("croniq", "s3cret")
    # allauth appends /.well-known/openid-configuration itself.
    assert app["settings"]["server_url"] == "https://auth.example/application/o/croniq"


def test_the_secret_may_come_from_a_file(tmp_path):
    secret = tmp_path / "oidc-secret"
    secret.write_text("from-a-file\n")
    code, values = settings_with(
        CRONIQ_OIDC_ISSUER="https://idp.example",
        CRONIQ_OIDC_CLIENT_ID="croniq",
        CRONIQ_OIDC_CLIENT_SECRET="ignored",
        CRONIQ_OIDC_CLIENT_SECRET_FILE=str(secret),
    )
    assert values["CRONIQ_OIDC_CLIENT_SECRET"] == "from-a-file"
    (app,) = values["SOCIALACCOUNT_PROVIDERS"]["openid_connect"]["APPS"]
    assert app["secret"] == "from-a-file"


def test_an_unreadable_secret_file_names_the_variable(tmp_path):
    code, error = settings_with(CRONIQ_OIDC_CLIENT_SECRET_FILE=str(tmp_path / "missing"))
    assert code != 0
    assert "CRONIQ_OIDC_CLIENT_SECRET_FILE: cannot read" in error


def test_a_malformed_only_names_the_variable():
    code, error = settings_with(CRONIQ_OIDC_ONLY="sometimes")
    assert code != 0
    assert "CRONIQ_OIDC_ONLY: expected a boolean" in error


def test_without_a_secret_no_provider_is_offered():
    code, values = settings_with(CRONIQ_OIDC_ISSUER="https://idp.example")
    assert values["SOCIALACCOUNT_PROVIDERS"] == {}


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
