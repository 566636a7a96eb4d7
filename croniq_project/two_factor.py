"""CRONIQ_REQUIRE_2FA: staff sign in with a second factor (docs/design.md §11).

With it on, a signed-in staff user without a TOTP authenticator, who did
not sign in through single sign-on, is sent to the enrolment page from
every page but those of signing in and out (ALWAYS_REACHABLE), until they
have enrolled: the session they already hold too, so turning the setting
on takes effect at once, not at the next login. Such a user cannot turn
two-factor off either (croniq_project.sign_in.MFAAdapter); a superuser
removes a lost authenticator in the admin, and its owner enrols anew.

Only browser sessions are concerned: the management API and the runner
protocol authenticate with keys and tokens, and check-in pings with their
URL, none of them with a session.
"""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

# What a user who must enrol can still reach, by path prefix: the sign-in
# pages (login, logout, reauthentication, and the two-factor pages:
# enrolment, its recovery codes), the admin's logout, static files (served
# before this middleware anyway) and the favicon, health and metrics, and
# everything machines call with a key, a token or a ping URL.
ALWAYS_REACHABLE = (
    "/accounts/",
    "/admin/logout/",
    "/static/",
    "/favicon.ico",
    "/healthz",
    "/metrics",
    "/api/",
    "/ping/",
)

# allauth's record of how this session signed in: single sign-on logins are
# recorded with this method (allauth.account.authentication).
SSO_METHOD = "socialaccount"


def reachable_without_enrolment(path: str) -> bool:
    return path.startswith(ALWAYS_REACHABLE)


def signed_in_with_sso(request: HttpRequest, user: AbstractBaseUser) -> bool:
    """Whether this session signed in through single sign-on: the identity
    provider then answers for the second factor."""
    from allauth.account.authentication import get_authentication_records

    return any(
        record.get("method") == SSO_METHOD for record in get_authentication_records(request, user)
    )


def must_have_authenticator(request: HttpRequest, user: AbstractBaseUser | AnonymousUser) -> bool:
    """Whether CRONIQ_REQUIRE_2FA holds `user` to a second factor in this session."""
    if not settings.CRONIQ_REQUIRE_2FA:
        return False
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return False
    return not signed_in_with_sso(request, user)


def has_authenticator(user: AbstractBaseUser) -> bool:
    """A TOTP authenticator: recovery codes alone (left when an admin removed
    the TOTP one) are no second factor at login."""
    from allauth.mfa.models import Authenticator

    return Authenticator.objects.filter(user_id=user.pk, type=Authenticator.Type.TOTP).exists()


def must_enrol(request: HttpRequest, user: AbstractBaseUser | AnonymousUser) -> bool:
    return must_have_authenticator(request, user) and not has_authenticator(user)


# The enrolment page says why the user was sent there when its URL has it.
REQUIRED_QUERY = "required=1"


def enrolment_redirect() -> HttpResponse:
    return HttpResponseRedirect(f"{reverse('mfa_activate_totp')}?{REQUIRED_QUERY}")


class EnrolmentRequiredMiddleware:
    """Sends a staff user who must enrol (`must_enrol`) to the enrolment
    page. Reads nothing while CRONIQ_REQUIRE_2FA is off or for the paths
    always reachable; otherwise one query for a signed-in staff user."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def concerned(self, request: HttpRequest) -> bool:
        return settings.CRONIQ_REQUIRE_2FA and not reachable_without_enrolment(request.path_info)

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        if self.concerned(request) and must_enrol(request, request.user):
            return enrolment_redirect()
        return self.get_response(request)

    async def __acall__(self, request):
        if self.concerned(request):
            user = await request.auser()
            if await sync_to_async(must_enrol)(request, user):
                return enrolment_redirect()
        return await self.get_response(request)
