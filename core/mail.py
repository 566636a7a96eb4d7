"""The email channel's server, wherever the installed Django configures it.

Django 6.1 configures mail servers in MAILERS and deprecates the EMAIL_*
settings and `get_connection()`; 5.2 knows only those. Settings write the
same environment variables into one or the other (croniq_project/settings.py)
and this module reads them back: the channel asks here, not Django.
"""

from typing import Any

from django.conf import settings
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend
from django.utils.module_loading import import_string

SMTP_BACKEND = "django.core.mail.backends.smtp.EmailBackend"


def uses_mailers() -> bool:
    """Whether the settings configure mail in MAILERS (Django 6.1 and later)."""
    return hasattr(settings, "MAILERS")


def configured_timeout() -> float | None:
    """The server's timeout in seconds as configured (EMAIL_TIMEOUT), or None."""
    if uses_mailers():
        return default_mailer().get("OPTIONS", {}).get("timeout")
    return settings.EMAIL_TIMEOUT


def connection(timeout: float | None) -> BaseEmailBackend:
    """A connection to the configured server that gives up after `timeout`
    seconds (the channel's own, not the configured one)."""
    if not uses_mailers():
        return mail.get_connection(timeout=timeout)
    config = default_mailer()
    backend = config.get("BACKEND", SMTP_BACKEND)
    options = dict(config.get("OPTIONS", {}))
    if backend == SMTP_BACKEND:  # other backends take no timeout
        options["timeout"] = timeout
    return import_string(backend)(alias="default", **options)


def default_mailer() -> dict[str, Any]:
    return settings.MAILERS["default"]
