import hashlib
import secrets
from collections.abc import Iterable
from datetime import datetime

from django.db import models

from control import scopes

KEY_PREFIX = "crk_"


def new_secret() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    # Keys are 256-bit random strings: a fast hash is enough (see
    # runners.models.hash_secret).
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKeyQuerySet(models.QuerySet):
    def usable(self, now: datetime) -> models.QuerySet:
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        )

    def authenticate(self, secret: str, now: datetime) -> "ApiKey | None":
        """The usable key for `secret`, or None (unknown, revoked, expired,
        or not an API key at all, such as a runner token)."""
        if not secret or not secret.startswith(KEY_PREFIX):
            return None
        return self.usable(now).filter(secret_hash=hash_secret(secret)).first()


class ApiKey(models.Model):
    """A credential for the management API: `Authorization: Bearer <key>`.
    The secret is shown once; only its hash is kept."""

    name = models.CharField(max_length=100, unique=True)
    secret_hash = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list, help_text="What the key may do (docs/design.md §8).")
    # Bound to one project: everything outside it is 404 to the key and left
    # out of its lists (docs/design.md §11). Empty: a global key.
    project = models.SlugField(
        max_length=100,
        blank=True,
        default="",
        db_default="",  # what the previous release's processes insert
        help_text="Bind the key to one project (empty: every project).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=200, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # The key that minted this one over the API: revoking it revokes this
    # one too (control.keys.revoke). None for keys made in the admin, and
    # for keys minted before parents were recorded. PROTECT: keys are never
    # deleted, and deleting a parent would free its children from the cascade.
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="children",
        editable=False,
        help_text="The key that minted this one; revoking it revokes this one too.",
    )

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        verbose_name = "API key"
        permissions = [("revoke_apikey", "Can revoke an API key")]

    def __str__(self):
        return self.name

    @classmethod
    def issue(
        cls,
        name: str,
        key_scopes: str | Iterable[str],
        expires_at: datetime | None = None,
        created_by: str = "",
        parent: "ApiKey | None" = None,
        project: str = "",
    ) -> "tuple[ApiKey, str]":
        """Create a key (minted by the key `parent`, if any), bound to
        `project` ("": global); returns (key, secret). The secret is not
        stored. ValueError for unknown scopes."""
        secret = new_secret()
        key = cls.objects.create(
            name=name,
            secret_hash=hash_secret(secret),
            scopes=scopes.parse(key_scopes),
            expires_at=expires_at,
            created_by=created_by,
            parent=parent,
            project=project,
        )
        return key, secret

    def usable(self, now: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    def allows(self, scope: str) -> bool:
        return scopes.covers(self.scopes, scope)
