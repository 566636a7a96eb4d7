"""Issuing and revoking API keys, audited, for the admin and the API.

A key may mint another only within its own reach: no scope it does not
cover, no expiry later than its own (DESIGN.md §8, "a key can never mint a
broader key").
"""

from django.db import IntegrityError, transaction

import audit
from control import scopes
from control.models import ApiKey


class KeyRefused(Exception):
    """Why a key may not be minted or named: `status` and `detail` answer it."""

    def __init__(self, status, detail):
        super().__init__(detail)
        self.status = status
        self.detail = detail


def beyond(parent, wanted_scopes, expires_at):
    """Why `parent` may not mint a key with these scopes and expiry, or None."""
    if not scopes.within(wanted_scopes, parent.scopes):
        extra = [s for s in wanted_scopes if not scopes.within([s], parent.scopes)]
        return f"scope {', '.join(extra)} is beyond this key's scopes"
    if parent.expires_at is not None:
        if expires_at is None:
            return "this key expires, so a key it creates must expire too"
        if expires_at > parent.expires_at:
            return (
                f"expires_at is later than this key's own expiry ({parent.expires_at.isoformat()})"
            )
    return None


def mint(parent, name, wanted_scopes, expires_at, now, actor):
    """A new key (key, secret) made by the key `parent`; KeyRefused when it
    would reach further than `parent`, or the name is taken."""
    wanted = scopes.parse(wanted_scopes)
    why = beyond(parent, wanted, expires_at)
    if why:
        raise KeyRefused(403, why)
    if expires_at is not None and expires_at <= now:
        raise KeyRefused(422, "body.expires_at: must be in the future")
    return issue(name, wanted, expires_at, now, actor, created_by=f"key {parent.name}")


def issue(name, key_scopes, expires_at, now, actor, created_by):
    try:
        with transaction.atomic():
            key, secret = ApiKey.issue(name, key_scopes, expires_at, created_by=created_by)
            audit.record(
                "apikey.created",
                target=key,
                actor=actor,
                at=now,
                data={"via": "api", "scopes": key.scopes, "expires_at": iso(expires_at)},
            )
    except IntegrityError:
        raise KeyRefused(409, f"an API key named {name!r} exists already") from None
    return key, secret


def revoke(key, now, actor=None):
    """Revoke `key`: its calls get 401 from now on. False if it was already."""
    with transaction.atomic():
        if not ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=now):
            return False
        key.revoked_at = now
        audit.record("apikey.revoked", target=key, actor=actor, at=now)
    return True


def iso(instant):
    return instant.isoformat() if instant is not None else None
