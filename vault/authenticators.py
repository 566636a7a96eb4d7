"""Two-factor secrets under the store's keys (docs/design.md §11).

allauth keeps a user's TOTP secret (`secret`) and the recovery codes' seed
(`seed`) in Authenticator.data, encrypted by Croniq's MFA adapter
(croniq_project.sign_in) with vault.crypto: `rotate_secrets` moves them
under the first key with the store's values, and names those no key
decrypts (their owners cannot sign in until the key is back, or a superuser
removes the authenticator and its owner enrols again).
"""

from datetime import datetime
from typing import Any

from allauth.mfa.models import Authenticator
from django.db import transaction

import audit
from vault import crypto

# The values of Authenticator.data that allauth encrypts.
ENCRYPTED = ("secret", "seed")
# Recovery codes imported from another two-factor package, each encrypted:
# Croniq imports none, but allauth reads them if a row has them.
ENCRYPTED_LISTS = ("migrated_codes",)


def rotated_data(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with its encrypted values under the first key; InvalidToken
    when no key decrypts one (a value in clear included)."""
    rotated = dict(data)
    for field in ENCRYPTED:
        if field in data:
            rotated[field] = crypto.rotate(data[field])
    for field in ENCRYPTED_LISTS:
        if field in data:
            rotated[field] = [crypto.rotate(token) for token in data[field]]
    return rotated


def describe(authenticator: Authenticator) -> str:
    """An authenticator as a superuser finds it in the admin: never its data."""
    return f"{authenticator.user} ({authenticator.type}, authenticator {authenticator.pk})"


def rotate_all(*, actor: object, now: datetime) -> tuple[int, list[str]]:
    """Re-encrypt every authenticator's secrets under the first key: (rows
    rotated, [authenticators no key decrypts]), audited `authenticators.rotated`.
    One row at a time under its row lock, the lock allauth takes to mark a
    recovery code used, so a code used meanwhile is never marked unused again."""
    rotated, unreadable = 0, []
    for pk in Authenticator.objects.order_by("pk").values_list("pk", flat=True):
        with transaction.atomic():
            authenticator = Authenticator.objects.select_for_update().filter(pk=pk).first()
            if authenticator is None:
                continue  # removed meanwhile
            try:
                data = rotated_data(authenticator.data)
            except crypto.InvalidToken:
                unreadable.append(describe(authenticator))
                continue
            if data == authenticator.data:
                continue  # nothing encrypted (no secret of ours)
            # Not `save()`: allauth's fields and timestamps stay as they are.
            Authenticator.objects.filter(pk=pk).update(data=data)
            rotated += 1
    audit.record(
        "authenticators.rotated",
        actor=actor,
        at=now,
        data={"rotated": rotated, "unreadable": unreadable},
    )
    return rotated, unreadable
