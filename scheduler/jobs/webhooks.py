"""A job's webhook (docs/design.md §14): a URL that runs the job when POSTed
to, with no API key. The call itself is answered by control.webhooks_api.

The URL's token is `<key>.<signature>`: `key` is random and stored on the
job (`Job.webhook_key`), `signature` an HMAC of it under the server's
SECRET_KEY (django.core.signing). Why not the token itself, nor its hash:

- A read of the database (a backup, a replica, a leaked dump) gives keys,
  never a URL that runs a job: that needs SECRET_KEY too. Storing the token
  would hand out every URL.
- Whoever may change the job still sees its URL at any time, in the admin
  and the API, signed again from the key. Storing only a hash (as API keys
  are) would show a URL once and never again.
- A token is checked before the database is asked (its signature, in
  constant time), so a flood of guesses costs no query.
- Regenerating draws a new key: the old URL answers 404 at once. Turning
  the webhook off forgets the key, so turning it on again gives a new URL.
- A token signed under one of SECRET_KEY_FALLBACKS is still accepted, so
  SECRET_KEY can be rotated; the URL shown is then signed under the new
  key. Changing SECRET_KEY without keeping the old one as a fallback
  changes every webhook URL.
"""

import re
import secrets

from django.apps import apps
from django.conf import settings
from django.core import signing

# Where the URLs live (control.webhooks_api): under the API's prefix, so the
# call takes the machine calls' path (no session, no CSRF, JSON errors, no
# HTTPS redirect for a POST).
PATH = "/api/v1/hooks/"
SALT = "croniq.job-webhook"
# 16 random bytes, URL-safe; then "." and the 43 characters of an HMAC-SHA256.
KEY_RE = re.compile(r"[A-Za-z0-9_-]{22}")
TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}")


def new_key() -> str:
    """A random webhook key (128 bits)."""
    return secrets.token_urlsafe(16)


def _signer() -> signing.Signer:
    return signing.Signer(salt=SALT, sep=".", algorithm="sha256")


def token(key: str) -> str:
    """The token of the URL whose key is `key`, under SECRET_KEY."""
    return _signer().sign(key)


def key_of(token: str) -> str | None:
    """The key `token` was signed for, or None: not a token this server
    (under SECRET_KEY or one of its fallbacks) made. Asks no database."""
    if not TOKEN_RE.fullmatch(token):
        return None
    try:
        return _signer().unsign(token)
    except signing.BadSignature:
        return None


def url(key: str | None) -> str | None:
    """The absolute webhook URL of a job whose key is `key` (None: no webhook)."""
    if not key:
        return None
    return f"{settings.CRONIQ_PUBLIC_URL}{PATH}{token(key)}"


def secret_problem(reference: str) -> str | None:
    """Why `reference` cannot be a job's `webhook_secret`, or None.

    The secret is a reference, never the value, read as channels read
    theirs (${CRONIQ_SECRET_NAME} or file:/run/secrets/name): the
    notifications app, above the scheduler, says what it makes of it
    through its app config's `secret_reference_problem`."""
    for config in apps.get_app_configs():
        check = getattr(config, "secret_reference_problem", None)
        if check is not None:
            problem = check(reference)
            if problem:
                return problem
    return None
