"""Single sign-on's settings (docs/design.md §11): the CRONIQ_OIDC_*
settings (read from the environment by croniq_project/settings.py) made
into allauth's provider configuration, and the system checks that name
what is missing.

Used by croniq_project/settings.py before Django is set up: nothing here
imports allauth or the app registry.
"""

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import checks

# allauth's name for the one OpenID provider Croniq signs in with: its URLs
# are /accounts/oidc/sso/login/ and the callback the provider redirects to,
# /accounts/oidc/sso/login/callback/.
PROVIDER_ID = "sso"
CALLBACK_PATH = f"/accounts/oidc/{PROVIDER_ID}/login/callback/"

INCOMPLETE = "croniq.E202"
ONLY_WITHOUT_SSO = "croniq.E203"


@dataclass(frozen=True)
class OIDC:
    issuer: str | None
    client_id: str | None
    client_secret: str | None
    roles_claim: str
    only: bool

    @property
    def configured(self) -> bool:
        """Single sign-on is offered: an issuer, a client id and its secret."""
        return bool(self.issuer and self.client_id and self.client_secret)

    def missing(self) -> list[str]:
        """The settings an issuer needs and lacks."""
        if not self.issuer:
            return []
        needed = {
            "CRONIQ_OIDC_CLIENT_ID": self.client_id,
            "CRONIQ_OIDC_CLIENT_SECRET": self.client_secret,
        }
        return [name for name, value in needed.items() if not value]


def providers(oidc: OIDC) -> dict[str, Any]:
    """SOCIALACCOUNT_PROVIDERS: allauth's OpenID Connect provider with one
    app, made from settings alone (no SocialApp rows); nothing when single
    sign-on is not configured, so the login page offers no SSO button."""
    if not oidc.configured:
        return {}
    assert oidc.issuer is not None  # configured says so
    return {
        "openid_connect": {
            # The authorization code flow with PKCE: a code stolen on its way
            # back is worth nothing without the verifier this session keeps.
            "OAUTH_PKCE_ENABLED": True,
            "APPS": [
                {
                    "provider_id": PROVIDER_ID,
                    "name": "SSO",
                    "client_id": oidc.client_id,
                    "secret": oidc.client_secret,
                    "settings": {
                        # allauth appends /.well-known/openid-configuration;
                        # issuers such as Authentik's end with a slash.
                        "server_url": oidc.issuer.rstrip("/"),
                        "oauth_pkce_enabled": True,
                    },
                }
            ],
        }
    }


def from_settings() -> OIDC:
    return OIDC(
        issuer=settings.CRONIQ_OIDC_ISSUER,
        client_id=settings.CRONIQ_OIDC_CLIENT_ID,
        client_secret=settings.CRONIQ_OIDC_CLIENT_SECRET,
        roles_claim=settings.CRONIQ_OIDC_ROLES_CLAIM,
        only=settings.CRONIQ_OIDC_ONLY,
    )


def incomplete(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """An issuer without its client: no SSO button would show and nobody
    would know why; CRONIQ_OIDC_ONLY without single sign-on: nobody but
    the superusers could sign in."""
    oidc = from_settings()
    errors: list[checks.CheckMessage] = []
    if oidc.only and not oidc.issuer:
        errors.append(
            checks.Error(
                "CRONIQ_OIDC_ONLY is on but CRONIQ_OIDC_ISSUER is not set: only superusers "
                "could sign in.",
                hint="Configure single sign-on (CRONIQ_OIDC_ISSUER, CRONIQ_OIDC_CLIENT_ID, "
                "CRONIQ_OIDC_CLIENT_SECRET) or turn CRONIQ_OIDC_ONLY off.",
                id=ONLY_WITHOUT_SSO,
            )
        )
    missing = oidc.missing()
    if not missing:
        return errors
    return errors + [
        checks.Error(
            f"CRONIQ_OIDC_ISSUER is set but {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not: single sign-on is off.",
            hint="Set the client id and secret the identity provider gave Croniq's client "
            "(the secret may come from CRONIQ_OIDC_CLIENT_SECRET_FILE), or unset "
            "CRONIQ_OIDC_ISSUER.",
            id=INCOMPLETE,
        )
    ]
