"""Single sign-on (docs/design.md §11): allauth's OpenID Connect provider,
fitted to Croniq by this adapter.

The provider is configured from settings alone (croniq_project.sso_settings).
At each login the roles claim sets the user's Croniq groups
(croniq_project.sso_roles); what is Croniq's here:

- a user is made at their first login, named after `preferred_username`
  (else the email, else `sub`), with no password: they sign in through the
  provider only;
- a login granting no Croniq role is refused, and leaves no usable account:
  nothing is made for a newcomer, and a known user's roles are taken away;
- a new login never takes over an existing user of the same name (however
  cased) that is not linked to this provider's account: a provider that lets
  people choose their username would otherwise hand anyone the account of
  `admin`. Such a login is refused saying so; a superuser renames or
  removes the local user.
- the provider's email signs nobody into an existing account either
  (SOCIALACCOUNT_EMAIL_AUTHENTICATION off) and is kept as the user's email
  only.
"""

import logging
from typing import Any

from allauth.account.utils import user_username
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialLogin
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.shortcuts import render

from croniq_project import sso_roles
from projects import names as project_names

logger = logging.getLogger(__name__)

NO_ROLE = (
    "Your identity provider grants you no Croniq role, so you cannot sign in here. "
    "Ask its administrators for one of the groups croniq:default:viewer, "
    "croniq:default:operator, croniq:default:editor or croniq:default:admin "
    "(in the {claim!r} claim)."
)
NAME_TAKEN = (
    "A Croniq user named {username!r} already exists and is not linked to your single "
    "sign-on account: signing in would take it over, so it is refused. Ask a Croniq "
    "superuser to rename or remove that user; your next sign-in then makes yours."
)
NO_USERNAME = (
    "Your identity provider sent no usable username (preferred_username, email or sub "
    "of at most 150 letters, digits and @.+-_): ask its administrators."
)


def claims(sociallogin: SocialLogin) -> dict[str, Any]:
    """The user's claims: the ID token's, overlaid with the userinfo
    endpoint's (allauth fetches both; a provider may put the roles in
    either)."""
    data = sociallogin.account.extra_data or {}
    merged: dict[str, Any] = {}
    for part in ("id_token", "userinfo"):
        if isinstance(data.get(part), dict):
            merged.update(data[part])
    return merged or dict(data)


def granted(sociallogin: SocialLogin) -> sso_roles.Grant:
    claim = claims(sociallogin).get(settings.CRONIQ_OIDC_ROLES_CLAIM)
    return sso_roles.grant(claim, project_names.known())


def valid_username(candidate: Any) -> bool:
    if not isinstance(candidate, str) or not candidate:
        return False
    field = get_user_model()._meta.get_field(get_user_model().USERNAME_FIELD)
    try:
        field.run_validators(candidate)
    except ValidationError:
        return False
    return len(candidate) <= (field.max_length or 150)


def username_of(data: dict[str, Any]) -> str | None:
    """preferred_username, else the email, else sub: the first one that is a
    valid Django username."""
    for key in ("preferred_username", "email", "sub"):
        if valid_username(data.get(key)):
            return str(data[key])
    return None


def refuse(request: HttpRequest, message: str) -> ImmediateHttpResponse:
    return ImmediateHttpResponse(
        render(request, "sign_in/sso_refused.html", {"message": message}, status=403)
    )


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def pre_social_login(self, request: HttpRequest, sociallogin: SocialLogin) -> None:
        """Every SSO login comes here once the provider has answered, before
        anyone is signed in or made: the roles are read, and the login is
        refused when they grant nothing or the name is taken."""
        grant = granted(sociallogin)
        data = claims(sociallogin)
        if sociallogin.is_existing:
            user = sociallogin.user
            sso_roles.log_ignored(user.get_username(), grant.ignored)
            # Taken away even when the login is refused next: the roles the
            # provider no longer grants must not outlive it in Croniq.
            sso_roles.apply(user, grant)
            if not grant.any:
                logger.warning("single sign-on: %s holds no Croniq role", user.get_username())
                raise refuse(request, NO_ROLE.format(claim=settings.CRONIQ_OIDC_ROLES_CLAIM))
            return
        username = username_of(data)
        sso_roles.log_ignored(username or str(data.get("sub")), grant.ignored)
        if not grant.any:
            logger.warning("single sign-on: %s holds no Croniq role", username)
            raise refuse(request, NO_ROLE.format(claim=settings.CRONIQ_OIDC_ROLES_CLAIM))
        if username is None:
            raise refuse(request, NO_USERNAME)
        if get_user_model().objects.filter(username__iexact=username).exists():
            logger.warning(
                "single sign-on: refused %r (sub %r): a user of that name exists and is not "
                "linked to this account",
                username,
                data.get("sub"),
            )
            raise refuse(request, NAME_TAKEN.format(username=username))
        # allauth would look for the email among its addresses and, finding
        # it taken, send the user to a sign-up form Croniq does not have.
        sociallogin.email_addresses = []

    def on_authentication_error(
        self,
        request: HttpRequest,
        provider: Any,
        error: Any = None,
        exception: Any = None,
        extra_context: Any = None,
    ) -> None:
        # The page says only that it failed; the log says why: what the
        # provider answered on its redirect, or what failed here.
        logger.warning(
            "single sign-on failed: %s: %r (provider's error: %r %r)",
            error,
            exception,
            request.GET.get("error"),
            request.GET.get("error_description"),
        )

    def populate_user(self, request: HttpRequest, sociallogin: SocialLogin, data: Any) -> Any:
        user = super().populate_user(request, sociallogin, data)
        user_username(user, username_of(claims(sociallogin)) or "")
        return user

    def is_open_for_signup(self, request: HttpRequest, sociallogin: SocialLogin) -> bool:
        # Only reached past pre_social_login: the newcomer holds a role.
        return True

    def is_auto_signup_allowed(self, request: HttpRequest, sociallogin: SocialLogin) -> bool:
        return True

    def save_user(self, request: HttpRequest, sociallogin: SocialLogin, form: Any = None) -> Any:
        """The newcomer, made with no password, then given their roles."""
        user = super().save_user(request, sociallogin, form)
        sso_roles.apply(user, granted(sociallogin))
        logger.info("single sign-on: made user %s", user.get_username())
        return user
