"""Cursor paging for the management API's lists (docs/design.md §8): `?limit=`
(default 50, at most 500) and an opaque `?cursor=`; the answer is
`{"items": [...], "next_cursor": str or null}`.

A cursor holds the ordering key of the last item it returned, so a page is
an index range scan however deep it is, and rows added meanwhile neither
repeat nor shift the pages after them.
"""

import base64
import json
from typing import Any

from django.db.models import Field, IntegerField, Model, QuerySet
from ninja.errors import HttpError

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


def encode(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def decode(cursor: str) -> Any:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeDecodeError):
        raise HttpError(422, "cursor: not a cursor of this list") from None


def page(
    queryset: QuerySet,
    key: str,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    descending: bool = False,
) -> tuple[list[Any], str | None]:
    """(rows, next_cursor): up to `limit` rows of `queryset` ordered by the
    unique field `key` (an id or a name), after the row `cursor` names."""
    if not 1 <= limit <= MAX_LIMIT:
        raise HttpError(422, f"limit: between 1 and {MAX_LIMIT}")
    if cursor:
        after = decode(cursor)
        if not fits(field_of(queryset.model, key), after):
            raise HttpError(422, "cursor: not a cursor of this list")
        queryset = queryset.filter(**{f"{key}__{'lt' if descending else 'gt'}": after})
    rows = list(queryset.order_by(f"-{key}" if descending else key)[: limit + 1])
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, encode(getattr(rows[-1], key))


def fits(field: Field, value: Any) -> bool:
    """Whether a decoded cursor can be compared with `field`: an id cursor
    given to a list by name, an integer beyond 64 bits or a NUL the
    database refuses is bad input, not a 500."""
    if isinstance(value, bool):
        return False
    if isinstance(field, IntegerField):
        return isinstance(value, int) and -(2**63) <= value < 2**63
    return isinstance(value, str) and "\x00" not in value


def field_of(model: type[Model], key: str) -> Field:
    return model._meta.pk if key == "pk" else model._meta.get_field(key)
