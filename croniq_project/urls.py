from allauth.account import views as account_views
from allauth.account.decorators import secure_admin_login
from allauth.socialaccount import views as socialaccount_views
from django.contrib import admin
from django.urls import include, path

from core.favicon import favicon
from croniq_project.api import api
from croniq_project.health import healthz
from croniq_project.metrics import metrics_view
from croniq_project.sign_in import login

# The admin's login page sends people to allauth's (croniq_project/sign_in.py),
# so a user with two-factor gives their code there too: no way into the admin
# with a password alone.
admin.site.login = secure_admin_login(admin.site.login)

# allauth's pages Croniq uses, and no others: no sign-up, email management or
# password reset by email (users are made by admins). Single sign-on's
# (croniq_project/sso.py): the OpenID provider's login and callback
# (oidc/sso/login/ and oidc/sso/login/callback/), and the pages saying a login
# was cancelled or failed; not allauth's social sign-up form nor its page
# linking a signed-in user to another account.
sign_in = [
    path("login/", login, name="account_login"),
    path("logout/", account_views.logout, name="account_logout"),
    path("inactive/", account_views.account_inactive, name="account_inactive"),
    path("reauthenticate/", account_views.reauthenticate, name="account_reauthenticate"),
    # TOTP enrolment, recovery codes, deactivation and the login's code step.
    path("2fa/", include("allauth.mfa.urls")),
    path("", include("allauth.socialaccount.providers.openid_connect.urls")),
    path(
        "social/login/cancelled/",
        socialaccount_views.login_cancelled,
        name="socialaccount_login_cancelled",
    ),
    path("social/login/error/", socialaccount_views.login_error, name="socialaccount_login_error"),
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("favicon.ico", favicon, name="favicon"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("accounts/", include(sign_in)),
    path("ping/", include("checks.urls")),
    path("api/", api.urls),
    path("", include("dashboard.urls")),
]
