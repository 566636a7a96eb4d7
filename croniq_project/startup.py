"""Turn configuration mistakes into one clear line instead of a traceback."""

import sys
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured


def fail_on_bad_configuration(start: Callable[[], Any]) -> Any:
    try:
        return start()
    except ImproperlyConfigured as e:
        print(f"croniq: configuration error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def web_application(make_application: Callable[[], Any]) -> Any:
    """The web application, refusing to start without a real SECRET_KEY."""

    def start():
        from django.conf import settings

        application = make_application()
        if settings.SECRET_KEY_MISSING:
            raise ImproperlyConfigured("SECRET_KEY: required when DEBUG is off (set SECRET_KEY)")
        return application

    return fail_on_bad_configuration(start)
