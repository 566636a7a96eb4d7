"""Signing in (docs/design.md §11): django-allauth's login, fitted to Croniq.

The dashboard and the admin both send people to allauth's login page
(`/accounts/login/`; the admin's own login redirects there, wrapped in
allauth's `secure_admin_login` in croniq_project/urls.py). A user with a
TOTP authenticator gives a code, or one of their recovery codes, after the
password and before they are signed in. What is Croniq's here:

- users are made by admins: no sign-up, by username as before, and only
  staff sign in (the admin's login was for staff alone);
- failed sign-ins are counted per username whatever Host the request
  named, and the message says when the limit refuses one;
- with CRONIQ_REQUIRE_2FA a staff user cannot turn two-factor off
  (croniq_project.two_factor);
- with single sign-on configured the page offers "Sign in with SSO"
  (croniq_project.sso), and with CRONIQ_OIDC_ONLY the password signs in
  superusers alone: their way in when the identity provider is down (the
  page folds the password form away under "Superuser sign-in");
- a user's two-factor changes are audited (croniq_project.two_factor_audit);
- the TOTP secret and the recovery codes' seed are stored encrypted under
  the secrets store's keys (vault.crypto; `rotate_secrets` rotates them,
  vault.authenticators), and one no key decrypts refuses the sign-in saying
  why (UnreadableSecret), never a 500.
"""

import logging
from typing import Any

from allauth.account.adapter import DefaultAccountAdapter, get_adapter
from allauth.account.forms import LoginForm as AllauthLoginForm
from allauth.account.views import LoginView as AllauthLoginView
from allauth.core import context
from allauth.mfa.adapter import DefaultMFAAdapter
from allauth.mfa.models import Authenticator
from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.deprecation import MiddlewareMixin

from croniq_project import sso_settings, two_factor
from vault import crypto

logger = logging.getLogger(__name__)

# The login field's name in the page and in what the form posts: what the
# admin's login form posted, and what password managers look for.
USERNAME_FIELD = "username"

WRONG_CREDENTIALS = "Enter the username and password of a staff account (both are case-sensitive)."
SSO_ONLY = (
    "Sign in with SSO: password sign-in is for superusers only on this server (CRONIQ_OIDC_ONLY)."
)


class LoginForm(AllauthLoginForm):
    """allauth's login form; its `login` field is posted as `username`,
    a user who is not staff is refused as a wrong password is, and with
    CRONIQ_OIDC_ONLY a user who is not a superuser is sent to SSO. (That
    message tells whoever typed the right password that it was right: they
    knew it already, and it signs them in nowhere.)"""

    def add_prefix(self, field_name: str) -> str:
        return super().add_prefix(USERNAME_FIELD if field_name == "login" else field_name)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.user is not None and not self.user.is_staff:
            self.user = None
            raise get_adapter(self.request).validation_error("username_password_mismatch")
        if self.user is not None and settings.CRONIQ_OIDC_ONLY and not self.user.is_superuser:
            self.user = None
            raise ValidationError(SSO_ONLY, code="sso_only")
        return cleaned


def sso_login_url() -> str | None:
    """Where the SSO button posts, or None when single sign-on is not configured."""
    if not settings.SOCIALACCOUNT_PROVIDERS.get("openid_connect"):
        return None
    return reverse("openid_connect_login", kwargs={"provider_id": sso_settings.PROVIDER_ID})


class LoginView(AllauthLoginView):
    """allauth's login page, told whether to offer SSO and whether the
    password form is the superusers' alone."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["sso_login_url"] = sso_login_url()
        context["sso_only"] = settings.CRONIQ_OIDC_ONLY
        return context


login = LoginView.as_view()


class AccountAdapter(DefaultAccountAdapter):
    error_messages = {
        **DefaultAccountAdapter.error_messages,
        "username_password_mismatch": WRONG_CREDENTIALS,
        "too_many_login_attempts": (
            "Too many failed sign-in attempts for this username or from this address: "
            "signing in is refused for a few minutes, even with the right password."
        ),
        "rate_limited": "Too many attempts: wait a few minutes, then try again.",
    }

    # allauth says "Successfully signed in as ..." on the next page; the
    # dashboard and the admin show the user's name already.
    QUIET = frozenset({"account/messages/logged_in.txt", "account/messages/logged_out.txt"})

    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return False

    def add_message(
        self,
        request: HttpRequest,
        level: int,
        message_template: str | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        if message_template in self.QUIET:
            return
        super().add_message(request, level, message_template, *args, **kwargs)

    def _get_login_attempts_cache_key(self, request: HttpRequest, **credentials: Any) -> str:
        # allauth's key starts with the site's domain, which without the sites
        # framework is the request's Host, port included: any port in a Host
        # header would start a fresh count for the same username.
        return f"login:{credentials.get('username', '').lower()}"


class MFAAdapter(DefaultMFAAdapter):
    error_messages = {
        **DefaultMFAAdapter.error_messages,
        "cannot_delete_authenticator": (
            "Two-factor sign-in is required for staff here (CRONIQ_REQUIRE_2FA): it cannot be "
            "turned off. To move to another device, ask a superuser to remove this "
            "authenticator in the admin, then enrol the new one."
        ),
    }

    def can_delete_authenticator(self, authenticator: Authenticator) -> bool:
        return not two_factor.must_have_authenticator(context.request, authenticator.user)

    # allauth passes every secret it stores in Authenticator.data (a TOTP
    # secret, the recovery codes' seed) through these two.
    def encrypt(self, text: str) -> str:
        return crypto.encrypt(text)

    def decrypt(self, encrypted_text: str) -> str:
        # No clear value is read as one: no release stored a secret in clear,
        # and a value that is not a token of our keys is an error to show,
        # not a secret to trust (a row written behind Croniq's back included).
        try:
            return crypto.decrypt(encrypted_text)
        except crypto.InvalidToken:
            logger.error(
                "a two-factor secret that no key of CRONIQ_SECRETS_KEYS decrypts: "
                "`croniq-admin rotate_secrets` names whose"
            )
            raise UnreadableSecret() from None


UNREADABLE_SECRET = (
    "Your two-factor sign-in cannot be checked: this server no longer has the key that "
    "encrypted it (CRONIQ_SECRETS_KEYS). Ask an administrator to restore that key, or to "
    "remove your authenticator in the admin so that you can set it up again."
)


class UnreadableSecret(ValidationError):
    """A two-factor secret that no configured key decrypts. Raised inside
    allauth's check of a code, it is the code's error: the sign-in (or the
    reauthentication) is refused with this message. Raised on another page
    (the recovery codes'), UnreadableSecretMiddleware answers with it."""

    def __init__(self) -> None:
        super().__init__(UNREADABLE_SECRET, code="unreadable_secret")


class UnreadableSecretMiddleware(MiddlewareMixin):
    """A page saying why, 503 (the server lacks a key), in place of a 500 when
    a two-factor page meets a secret no key decrypts."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, UnreadableSecret):
            return None
        return render(
            request,
            "sign_in/unreadable_secret.html",
            {"message": UNREADABLE_SECRET},
            status=503,
        )
