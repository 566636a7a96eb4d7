"""RFC 6238 TOTP codes, written here from the RFC rather than taken from
allauth, so the tests check Croniq against the standard authenticator apps
follow (HMAC-SHA1, 30-second steps, 6 digits)."""

import base64
import hashlib
import hmac
import struct

STEP = 30


def hotp(key: bytes, counter: int, digits: int = 6) -> str:
    digest = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    value = int.from_bytes(digest[offset : offset + 4], "big") & 0x7FFFFFFF
    return str(value % 10**digits).zfill(digits)


def totp(secret: str, at: float, digits: int = 6) -> str:
    """The code of the base32 `secret` at the Unix time `at`."""
    key = base64.b32decode(secret.upper() + "=" * (-len(secret) % 8))
    return hotp(key, int(at // STEP), digits)
