"""MIDDLEWARE that knows Croniq's middleware are subclasses of Django's.

Croniq installs async-capable subclasses of Django's security, CSRF,
clickjacking, session... middleware (croniq_project.middleware). Django's
deploy checks ask `"django.middleware.security.SecurityMiddleware" in
settings.MIDDLEWARE`, so they reported them missing (security.W001-W003) and,
worse, skipped every warning those answers gate: HSTS, SSL redirect, secure
CSRF cookie. This list answers such questions for subclasses too, so every
Django check sees the middleware as it really is.
"""

from collections.abc import Collection, Iterable

from django.utils.module_loading import import_string

from core.framework_overrides import in_use


class InstalledMiddleware(list):
    def __contains__(self, path):
        if super().__contains__(path):
            return True
        try:
            wanted = import_string(path)
        except ImportError:
            return False
        if not isinstance(wanted, type):
            return False
        # Imported only when asked (by a system check, after set-up): the
        # middleware modules cannot be imported while settings load.
        return any(
            isinstance(installed, type) and issubclass(installed, wanted)
            for installed in map(import_string, self)
        )


# Each of Croniq's middleware (croniq_project.middleware) -> the stock one it
# overrides: what MIDDLEWARE names when the `middleware` override is off.
STOCK_MIDDLEWARE = {
    "croniq_project.middleware.MetricsBeforeMiddleware": (
        "django_prometheus.middleware.PrometheusBeforeMiddleware"
    ),
    "croniq_project.middleware.SecurityHeadersMiddleware": (
        "django.middleware.security.SecurityMiddleware"
    ),
    "croniq_project.middleware.StaticFilesMiddleware": "whitenoise.middleware.WhiteNoiseMiddleware",
    "croniq_project.middleware.BrowserSessionMiddleware": (
        "django.contrib.sessions.middleware.SessionMiddleware"
    ),
    "croniq_project.middleware.CommonRequestMiddleware": (
        "django.middleware.common.CommonMiddleware"
    ),
    # Croniq's own behaviour (JSON errors under /api/), run as Django runs
    # any MiddlewareMixin.
    "croniq_project.middleware.ApiErrorsMiddleware": "croniq_project.middleware.ApiErrors",
    "croniq_project.middleware.BrowserCsrfMiddleware": "django.middleware.csrf.CsrfViewMiddleware",
    "croniq_project.middleware.BrowserAuthenticationMiddleware": (
        "django.contrib.auth.middleware.AuthenticationMiddleware"
    ),
    "croniq_project.middleware.BrowserMessageMiddleware": (
        "django.contrib.messages.middleware.MessageMiddleware"
    ),
    "croniq_project.middleware.FrameOptionsMiddleware": (
        "django.middleware.clickjacking.XFrameOptionsMiddleware"
    ),
    "croniq_project.middleware.MetricsAfterMiddleware": (
        "django_prometheus.middleware.PrometheusAfterMiddleware"
    ),
}


def middleware_setting(paths: Iterable[str], stock: Collection[str]) -> list[str]:
    """MIDDLEWARE from Croniq's `paths`, with the overrides `stock` turns off
    (CRONIQ_STOCK_DJANGO, core.framework_overrides) replaced by Django's
    own: the stock middleware, a plain list."""
    if not in_use("middleware", stock):
        paths = [STOCK_MIDDLEWARE.get(path, path) for path in paths]
    if not in_use("middleware_list", stock):
        return list(paths)
    return InstalledMiddleware(paths)
