"""Tiny helpers that read settings from the environment and fail loudly.

A malformed value stops start-up with one line naming the variable, instead
of a default silently taking its place.
"""

import os

from django.core.exceptions import ImproperlyConfigured

TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off", ""}


def env(name, default=None):
    """The value of `name`, or of the file named by `name_FILE` (for secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError as e:
            raise ImproperlyConfigured(f"{name}_FILE: cannot read {path}: {e}") from None
    return os.environ.get(name, default)


def envbool(name, default):
    value = env(name)
    if value is None:
        return default
    value = value.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: expected a boolean (1/0, true/false), got {value!r}")


def envint(name, default, minimum=None):
    value = env(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum}, got {number}")
    return number


def envfloat(name, default, minimum=None):
    value = env(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected a number, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum}, got {number}")
    return number


def envlist(name, default):
    value = env(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]
