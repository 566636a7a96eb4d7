"""Who may write a job or a calendar through the API (docs/design.md §8).

What `apply` manages belongs to the file: an API write to it is refused
(409) unless the call adopts it, which hands it to the API (audited
`job.adopted` / `calendar.adopted`); `apply --prune` leaves it alone from
then on. Rows made in the admin or through the API are anyone's to change.
"""

from datetime import datetime
from typing import Any

from django.db import models
from ninja.errors import HttpError

import audit
from core.ownership import ManagedBy, adoption, manager_text


def adopt_flag(value: Any, where: str = "adopt") -> bool:
    if not isinstance(value, bool):
        raise HttpError(422, f"{where}: expected true or false")
    return value


def check(obj: models.Model, adopt: bool) -> bool:
    """409 when `obj` is managed by apply and the call does not adopt it;
    returns whether the write adopts it."""
    if obj.managed_by != ManagedBy.APPLY:
        return False
    if not adopt:
        kind = obj._meta.model_name
        raise HttpError(
            409, f"{kind} {obj.name} is managed by {manager_text(obj)}; pass adopt to take it over"
        )
    return True


def record_adopted(obj: models.Model, *, now: datetime, actor: object) -> None:
    """Audit the API's adoption of `obj` (as read before the write)."""
    data = adoption(obj, ManagedBy.API)
    if data is not None:
        audit.record(f"{obj._meta.model_name}.adopted", target=obj, actor=actor, at=now, data=data)
