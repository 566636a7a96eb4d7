"""Single sign-on configured for the client tests, and a login through
allauth's real views with the provider's side stubbed: the discovery
document, and the token exchange answering the claims a test gives."""

from urllib.parse import parse_qs, urlsplit

import pytest
from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter

from croniq_project import sso_settings
from tests.sign_in.conftest import staff  # noqa: F401 (a fixture the tests here use)

ISSUER = "https://idp.example"
DISCOVERY = {
    "issuer": ISSUER,
    "authorization_endpoint": f"{ISSUER}/auth",
    "token_endpoint": f"{ISSUER}/token",
    "userinfo_endpoint": f"{ISSUER}/me",
    "jwks_uri": f"{ISSUER}/jwks",
    "token_endpoint_auth_methods_supported": ["client_secret_basic"],
}


@pytest.fixture
def oidc(settings, monkeypatch):
    """Single sign-on configured as the settings make it from the
    environment; the provider's answers come from `provider.claims`."""
    config = sso_settings.OIDC(
        issuer=ISSUER,
        client_id="croniq",
        client_secret="s3cret",
        roles_claim="groups",
        only=False,
    )
    settings.CRONIQ_OIDC_ISSUER = config.issuer
    settings.CRONIQ_OIDC_CLIENT_ID = config.client_id
    settings.CRONIQ_OIDC_CLIENT_SECRET = config.client_secret
    settings.CRONIQ_OIDC_ROLES_CLAIM = config.roles_claim
    settings.SOCIALACCOUNT_PROVIDERS = sso_settings.providers(config)

    provider = Stub()
    monkeypatch.setattr(OpenIDConnectOAuth2Adapter, "openid_config", DISCOVERY)

    def get_access_token_data(self, request, app, client, pkce_code_verifier=None):
        provider.verifiers.append(pkce_code_verifier)
        return {"access_token": "token", "token_type": "Bearer"}

    def complete_login(self, request, app, token, **kwargs):
        return self.get_provider().sociallogin_from_response(
            request, {"userinfo": dict(provider.claims)}
        )

    monkeypatch.setattr(OpenIDConnectOAuth2Adapter, "get_access_token_data", get_access_token_data)
    monkeypatch.setattr(OpenIDConnectOAuth2Adapter, "complete_login", complete_login)
    return provider


class Stub:
    def __init__(self):
        self.claims = {}
        self.verifiers = []
        self.authorize_urls = []


LOGIN = f"/accounts/oidc/{sso_settings.PROVIDER_ID}/login/"


def sso_login(client, provider, claims, next_url=None):
    """Click "Sign in with SSO", come back from the provider with a code:
    the answer of Croniq's callback."""
    provider.claims = claims
    start = client.post(LOGIN + (f"?next={next_url}" if next_url else ""))
    assert start.status_code == 302, start.content.decode()
    provider.authorize_urls.append(start["Location"])
    query = parse_qs(urlsplit(start["Location"]).query)
    return client.get(sso_settings.CALLBACK_PATH, {"state": query["state"][0], "code": "the-code"})


def signed_in_as(client):
    from django.contrib.auth import get_user_model

    user_id = client.session.get("_auth_user_id")
    return get_user_model().objects.get(pk=user_id) if user_id else None
