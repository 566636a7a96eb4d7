"""Secret values at rest: Fernet tokens (AES-128-CBC with an HMAC-SHA256,
the `cryptography` package) under the keys of CRONIQ_SECRETS_KEYS.

The first key encrypts; every key decrypts (MultiFernet), so a new key is
put first, `rotate_secrets` re-encrypts every value under it, and the old
one is removed afterwards. Without CRONIQ_SECRETS_KEYS an install still
works: a key derived from SECRET_KEY encrypts (system check croniq.W201
says so), and it stays the last decrypting key once keys are set, so setting
them later loses nothing (`rotate_secrets` moves the values over).
"""

import base64
import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

__all__ = ["InvalidToken", "decrypt", "encrypt", "fernet", "rotate"]


def derived_key(secret_key: str) -> bytes:
    """A Fernet key from SECRET_KEY, for installs that set no secrets key.
    HKDF with its own label, so it is no key SECRET_KEY signs anything with."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"croniq secrets store")
    return base64.urlsafe_b64encode(hkdf.derive(secret_key.encode()))


def parsed_keys(configured: list[str], secret_key: str) -> list[Fernet]:
    """The Fernets of `configured` (CRONIQ_SECRETS_KEYS), then SECRET_KEY's
    derived one; ImproperlyConfigured names a malformed key by position."""
    found = []
    for position, key in enumerate(configured, start=1):
        try:
            found.append(Fernet(key.encode()))
        except (ValueError, TypeError):
            raise ImproperlyConfigured(
                f"CRONIQ_SECRETS_KEYS: key {position} is not a Fernet key (32 url-safe "
                "base64-encoded bytes; make one with `croniq-admin rotate_secrets --new-key`)"
            ) from None
    derived = Fernet(derived_key(secret_key))
    return [*found, derived]


@functools.cache
def cached_fernet(configured: tuple[str, ...], secret_key: str) -> MultiFernet:
    return MultiFernet(parsed_keys(list(configured), secret_key))


def fernet() -> MultiFernet:
    """The MultiFernet of the current settings (settings may change in tests)."""
    return cached_fernet(tuple(settings.CRONIQ_SECRETS_KEYS), settings.SECRET_KEY)


def encrypt(value: str) -> str:
    return fernet().encrypt(value.encode()).decode()


def decrypt(token: str) -> str:
    """The value; InvalidToken when no key decrypts it."""
    return fernet().decrypt(token.encode()).decode()


def rotate(token: str) -> str:
    """`token` encrypted under the first key; InvalidToken when no key decrypts it."""
    return fernet().rotate(token.encode()).decode()


def new_key() -> str:
    return Fernet.generate_key().decode()
