"""System checks of the secrets store's keys (`manage.py check`, and
`check --deploy` for the warning)."""

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from vault import crypto

KEYS_UNSET = "croniq.W201"
KEY_MALFORMED = "croniq.E201"


@checks.register(checks.Tags.security)
def malformed_keys(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    try:
        crypto.parsed_keys(settings.CRONIQ_SECRETS_KEYS, settings.SECRET_KEY)
    except ImproperlyConfigured as e:
        return [checks.Error(str(e), id=KEY_MALFORMED)]
    return []


@checks.register(checks.Tags.security, deploy=True)
def keys_unset(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if settings.CRONIQ_SECRETS_KEYS:
        return []
    return [
        checks.Warning(
            "CRONIQ_SECRETS_KEYS is not set: stored secrets are encrypted with a key "
            "derived from SECRET_KEY, so whoever holds SECRET_KEY and the database reads them, "
            "and rotating SECRET_KEY makes them unreadable.",
            hint="Set CRONIQ_SECRETS_KEYS (or CRONIQ_SECRETS_KEYS_FILE) to a key from "
            "`croniq-admin rotate_secrets --new-key`, then run `croniq-admin rotate_secrets`.",
            id=KEYS_UNSET,
        )
    ]
