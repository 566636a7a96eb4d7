"""MIDDLEWARE that knows Croniq's middleware are subclasses of Django's.

Croniq installs async-capable subclasses of Django's security, CSRF,
clickjacking, session... middleware (croniq_project.middleware). Django's
deploy checks ask `"django.middleware.security.SecurityMiddleware" in
settings.MIDDLEWARE`, so they reported them missing (security.W001-W003) and,
worse, skipped every warning those answers gate: HSTS, SSL redirect, secure
CSRF cookie. This list answers such questions for subclasses too, so every
Django check sees the middleware as it really is.
"""

from django.utils.module_loading import import_string


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
