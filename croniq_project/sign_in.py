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
- a user's two-factor changes are audited: `user.two_factor_on`,
  `user.two_factor_off`, `user.recovery_codes_renewed`, and each
  `user.recovery_code_used` (a code that stands in for a lost phone).
"""

from typing import Any

from allauth.account.adapter import DefaultAccountAdapter, get_adapter
from allauth.account.forms import LoginForm as AllauthLoginForm
from allauth.core import context
from allauth.mfa import signals
from allauth.mfa.adapter import DefaultMFAAdapter
from allauth.mfa.models import Authenticator
from django.http import HttpRequest

import audit
from croniq_project import two_factor

# The login field's name in the page and in what the form posts: what the
# admin's login form posted, and what password managers look for.
USERNAME_FIELD = "username"

WRONG_CREDENTIALS = "Enter the username and password of a staff account (both are case-sensitive)."


class LoginForm(AllauthLoginForm):
    """allauth's login form; its `login` field is posted as `username`,
    and a user who is not staff is refused as a wrong password is."""

    def add_prefix(self, field_name: str) -> str:
        return super().add_prefix(USERNAME_FIELD if field_name == "login" else field_name)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.user is not None and not self.user.is_staff:
            self.user = None
            raise get_adapter(self.request).validation_error("username_password_mismatch")
        return cleaned


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


def audit_two_factor() -> None:
    """Record the users' own two-factor changes in the audit trail (an
    admin's removal of an authenticator is audited by croniq_project.admin)."""
    signals.authenticator_added.connect(on_added, dispatch_uid="croniq.two_factor_on")
    signals.authenticator_removed.connect(on_removed, dispatch_uid="croniq.two_factor_off")
    signals.authenticator_reset.connect(on_reset, dispatch_uid="croniq.recovery_codes_renewed")
    signals.authenticator_used.connect(on_used, dispatch_uid="croniq.recovery_code_used")


def record(action: str, user: Any, authenticator: Authenticator) -> None:
    audit.record(action, target=user, actor=user, data={"type": authenticator.type})


def on_added(sender: Any, user: Any, authenticator: Authenticator, **kwargs: Any) -> None:
    if authenticator.type == Authenticator.Type.TOTP:
        record("user.two_factor_on", user, authenticator)


def on_removed(sender: Any, user: Any, authenticator: Authenticator, **kwargs: Any) -> None:
    if authenticator.type == Authenticator.Type.TOTP:
        record("user.two_factor_off", user, authenticator)


def on_reset(sender: Any, user: Any, authenticator: Authenticator, **kwargs: Any) -> None:
    record("user.recovery_codes_renewed", user, authenticator)


def on_used(sender: Any, user: Any, authenticator: Authenticator, **kwargs: Any) -> None:
    if authenticator.type == Authenticator.Type.RECOVERY_CODES:
        record("user.recovery_code_used", user, authenticator)
