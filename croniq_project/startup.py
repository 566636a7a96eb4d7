"""Turn configuration mistakes into one clear line instead of a traceback."""

import sys

from django.core.exceptions import ImproperlyConfigured


def fail_on_bad_configuration(start):
    try:
        return start()
    except ImproperlyConfigured as e:
        print(f"croniq: configuration error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
