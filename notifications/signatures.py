"""Webhook signatures (docs/design.md §9): the `Croniq-Signature` header
Croniq sends, and the check a receiver makes.
"""

import hashlib
import hmac
from datetime import datetime


def sign(secret: str | bytes, timestamp: datetime | float, body: str | bytes) -> str:
    """The `Croniq-Signature` value: `t=<unix seconds>,v1=<hex HMAC-SHA256>`."""
    timestamp = _unix(timestamp)
    return f"t={timestamp},v1={_digest(secret, timestamp, body)}"


def verify(
    secret: str | bytes,
    header: str | None,
    body: str | bytes,
    now: datetime | float,
    tolerance: float = 300,
) -> bool:
    """Whether `header` signs `body` with `secret`, within `tolerance` seconds
    of `now`: what a receiver checks. Several v1 values may be given (a
    secret being rotated); one match is enough."""
    timestamp, signatures = None, []
    for part in (header or "").split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            timestamp = value
        elif key == "v1":
            signatures.append(value)
    try:
        timestamp = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs(_unix(now) - timestamp) > tolerance:
        return False
    expected = _digest(secret, timestamp, body).encode()
    return any(hmac.compare_digest(expected, given.encode()) for given in signatures)


def _digest(secret, timestamp, body):
    secret = secret.encode() if isinstance(secret, str) else secret
    body = body.encode() if isinstance(body, str) else body
    return hmac.new(secret, b"%d." % timestamp + body, hashlib.sha256).hexdigest()


def _unix(now):
    if isinstance(now, datetime):
        if now.tzinfo is None:
            raise ValueError("now must be a timezone-aware datetime")
        return int(now.timestamp())
    return int(now)
