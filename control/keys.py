"""Issuing and revoking API keys, audited, for the admin and the API.

A key may mint another only within its own reach: no scope it does not
cover, no expiry later than its own, and a key bound to a project only keys
bound to that project, never a global one (docs/design.md §8, §11: "a key
can never mint a broader key").
"""

from collections.abc import Iterable
from datetime import datetime

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


def beyond(
    parent: ApiKey, wanted_scopes: list[str], expires_at: datetime | None, project: str = ""
) -> str | None:
    """Why `parent` may not mint a key with these scopes, expiry and
    project ("": global), or None."""
    if parent.project and project != parent.project:
        return f"a key bound to project {parent.project!r} mints only keys bound to it"
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


def mint(
    parent: ApiKey,
    name: str,
    wanted_scopes: str | Iterable[str],
    expires_at: datetime | None,
    now: datetime,
    actor: object,
    project: str | None = None,
) -> tuple[ApiKey, str]:
    """A new key (key, secret) made by the key `parent`, which it records,
    bound to `project` (None: `parent`'s own; "": global); KeyRefused when
    it would reach further than `parent`, the name is taken, or `parent`
    was revoked meanwhile."""
    wanted = scopes.parse(wanted_scopes)
    project = parent.project if project is None else project
    why = beyond(parent, wanted, expires_at, project)
    if why:
        raise KeyRefused(403, why)
    if expires_at is not None and expires_at <= now:
        raise KeyRefused(422, "body.expires_at: must be in the future")
    with transaction.atomic():
        # The parent's row locked until the child is stored: a revocation
        # running now either comes first (refused here) or finds the child.
        if not ApiKey.objects.select_for_update().filter(pk=parent.pk).usable(now).exists():
            raise KeyRefused(401, "this key was revoked")
        made_by = f"key {parent.name}"
        return issue(name, wanted, expires_at, now, actor, made_by, parent=parent, project=project)


def issue(
    name: str,
    key_scopes: str | Iterable[str],
    expires_at: datetime | None,
    now: datetime,
    actor: object,
    created_by: str,
    parent: ApiKey | None = None,
    project: str = "",
) -> tuple[ApiKey, str]:
    try:
        with transaction.atomic():
            key, secret = ApiKey.issue(
                name, key_scopes, expires_at, created_by=created_by, parent=parent, project=project
            )
            data = {"via": "api", "scopes": key.scopes, "expires_at": iso(expires_at)}
            if project:
                data["project"] = project
            audit.record("apikey.created", target=key, actor=actor, at=now, data=data)
    except IntegrityError:
        raise KeyRefused(409, f"an API key named {name!r} exists already") from None
    return key, secret


def revoke(key: ApiKey, now: datetime, actor: object = None) -> int:
    """Revoke `key` and every key minted from it, its children's children
    included, in one transaction, each audited: their calls get 401 from
    now on. Returns how many were revoked (0: all were already)."""
    revoked = 0
    with transaction.atomic():
        for each in with_descendants(key):
            if not ApiKey.objects.filter(pk=each.pk, revoked_at__isnull=True).update(
                revoked_at=now
            ):
                continue
            each.revoked_at = now
            if each.pk == key.pk:
                key.revoked_at = now
            # A descendant's event names the key whose revocation took it along.
            data = {} if each.pk == key.pk else {"revoked_with": key.name}
            audit.record("apikey.revoked", target=each, actor=actor, at=now, data=data)
            revoked += 1
    return revoked


def with_descendants(key: ApiKey) -> list[ApiKey]:
    """[key, its children, their children, ...], each generation's rows
    locked before its children are read: a key minting a child now either
    stores it first (and it is found here) or waits and is refused."""
    found, generation = [], [key.pk]
    while generation:
        rows = list(ApiKey.objects.select_for_update().filter(pk__in=generation).order_by("pk"))
        found.extend(rows)
        generation = list(ApiKey.objects.filter(parent__in=generation).values_list("pk", flat=True))
    return found


def iso(instant: datetime | None) -> str | None:
    return instant.isoformat() if instant is not None else None
