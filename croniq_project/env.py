"""Tiny helpers that read settings from the environment and fail loudly.

A malformed value stops start-up with one line naming the variable, instead
of a default silently taking its place.
"""

import ipaddress
import math
import os
import urllib.parse
from typing import TypeVar

from django.core.exceptions import ImproperlyConfigured

Number = TypeVar("Number", int, float)

TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off", ""}


def env(name: str, default: str | None = None) -> str | None:
    """The value of `name`, or of the file named by `name_FILE` (for secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError as e:
            raise ImproperlyConfigured(f"{name}_FILE: cannot read {path}: {e}") from None
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    value = env(name)
    if value is None:
        return default
    value = value.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: expected a boolean (1/0, true/false), got {value!r}")


def envint(name: str, default: int, minimum: int | None = 0) -> int:
    """An integer; negative values are refused unless `minimum` allows them."""
    value = env(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected an integer, got {value!r}") from None
    return at_least(name, number, minimum)


def envfloat(name: str, default: float, minimum: float | None = 0) -> float:
    """A finite number: `nan` and `inf` parse as floats but mean nothing here."""
    value = env(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ImproperlyConfigured(f"{name}: expected a finite number, got {value!r}")
    return at_least(name, number, minimum)


def at_least(name: str, number: Number, minimum: float | None) -> Number:
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum}, got {number}")
    return number


def envlist(name: str, default: list[str]) -> list[str]:
    value = env(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def envnetworks(name: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Comma-separated networks ("10.0.0.0/8, fd00::/8", or one address)
    as ipaddress networks; empty when unset."""
    networks = []
    for item in envlist(name, []):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: expected networks such as 10.0.0.0/8, got {item!r}"
            ) from None
    return networks


def envurl(name: str) -> str | None:
    """An http:// or https:// URL with a host; None when unset or empty."""
    value = (env(name) or "").strip()
    if not value:
        return None
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 (it raises on a port that is no number)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ImproperlyConfigured(
            f"{name}: expected an http:// or https:// URL such as http://collector:4318, "
            f"got {value!r}"
        )
    return value


def envproxyheader(name: str) -> tuple[str, str] | None:
    """`X-Forwarded-Proto` or `X-Forwarded-Ssl: on` -> Django's
    SECURE_PROXY_SSL_HEADER tuple (the value defaults to `https`); None when unset."""
    value = (env(name) or "").strip()
    if not value:
        return None
    header, _, expected = value.partition(":")
    header, expected = header.strip(), expected.strip() or "https"
    if not header or not all(c.isalnum() or c == "-" for c in header):
        raise ImproperlyConfigured(
            f"{name}: expected a header name such as X-Forwarded-Proto, got {value!r}"
        )
    return ("HTTP_" + header.upper().replace("-", "_"), expected)


def check_heartbeat_fits_lease(heartbeat_interval: float, lease_ttl: float) -> None:
    """A runner renews its leases with each heartbeat; with fewer than three
    heartbeats per lease, one late heartbeat loses every healthy job."""
    if heartbeat_interval > lease_ttl / 3:
        raise ImproperlyConfigured(
            f"CRONIQ_HEARTBEAT_INTERVAL ({heartbeat_interval:g}s) must be at most a third of "
            f"CRONIQ_LEASE_TTL ({lease_ttl:g}s): lower the interval to {lease_ttl / 3:g} "
            f"or raise the TTL to {heartbeat_interval * 3:g}"
        )
