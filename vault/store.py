"""Writing and reading the store: every change audited without its value
(`secret.created`, `secret.changed`, `secret.deleted`, `secrets.rotated`)."""

from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

import audit
from vault import crypto
from vault.models import DEFAULT_PROJECT, Secret

# A value is an environment variable's: argv and the environment of a
# process share a few hundred kilobytes on Linux.
LONGEST_VALUE = 64 * 1024


def check_value(value: str) -> None:
    if not value:
        raise ValidationError({"value": "must not be empty"})
    if len(value.encode()) > LONGEST_VALUE:
        raise ValidationError({"value": f"at most {LONGEST_VALUE} bytes"})
    if "\x00" in value:
        raise ValidationError({"value": "must not hold a NUL character"})


def put(
    name: str, value: str, *, project: str = DEFAULT_PROJECT, actor: object, now: datetime
) -> tuple[Secret, bool]:
    """Create the secret or replace its value: (secret, created).
    ValidationError names the field of a bad name or value."""
    check_value(value)
    secret = Secret(project=project, name=name)
    secret.full_clean(exclude=["ciphertext"], validate_unique=False, validate_constraints=False)
    ciphertext = crypto.encrypt(value)
    with transaction.atomic():
        current = Secret.objects.select_for_update().filter(project=project, name=name).first()
        if current is None:
            try:
                with transaction.atomic():
                    secret.ciphertext = ciphertext
                    secret.save()
            except IntegrityError:  # created by another writer meanwhile
                current = Secret.objects.select_for_update().get(project=project, name=name)
        if current is not None:
            current.ciphertext = ciphertext
            current.save(update_fields=["ciphertext", "updated_at"])
            audit.record("secret.changed", target=current, actor=actor, at=now, data=facts(current))
            return current, False
        audit.record("secret.created", target=secret, actor=actor, at=now, data=facts(secret))
        return secret, True


def delete(secret: Secret, *, actor: object, now: datetime) -> None:
    with transaction.atomic():
        audit.record("secret.deleted", target=secret, actor=actor, at=now, data=facts(secret))
        secret.delete()


def names(project: str = DEFAULT_PROJECT) -> set[str]:
    return set(Secret.objects.filter(project=project).values_list("name", flat=True))


def rotate_all(*, actor: object, now: datetime) -> tuple[int, list[str]]:
    """Re-encrypt every value under the first key: (rows rotated, [secrets
    no key decrypts]). Rows are rotated one at a time under their row lock,
    so a value written meanwhile is never overwritten with an older one."""
    rotated, unreadable = 0, []
    for pk in Secret.objects.order_by("pk").values_list("pk", flat=True):
        with transaction.atomic():
            secret = Secret.objects.select_for_update().filter(pk=pk).first()
            if secret is None:
                continue  # deleted meanwhile
            try:
                ciphertext = crypto.rotate(secret.ciphertext)
            except crypto.InvalidToken:
                unreadable.append(str(secret))
                continue
            # Not `save()`: a rotation is no change of value (updated_at stays).
            Secret.objects.filter(pk=pk).update(ciphertext=ciphertext)
            rotated += 1
    audit.record(
        "secrets.rotated", actor=actor, at=now, data={"rotated": rotated, "unreadable": unreadable}
    )
    return rotated, unreadable


def facts(secret: Secret) -> dict[str, str]:
    """What an audit event says of a secret: never its value."""
    return {"project": secret.project, "name": secret.name}
