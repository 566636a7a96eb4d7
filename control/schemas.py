"""Shapes shared by the management API's calls: text that the database can
store, the error bodies (DESIGN.md §4) and the paging query (§8)."""

from typing import Annotated, Any

from ninja import Field, Schema
from pydantic import AfterValidator, StrictStr, StringConstraints

from control import paging


def storable(value):
    # PostgreSQL refuses NUL and lone surrogates: a 422 here, not a 500 there.
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return value


def Text(min_length=0, max_length=None):  # noqa: N802 - reads as a type in schemas
    return Annotated[
        StrictStr,
        StringConstraints(min_length=min_length, max_length=max_length),
        AfterValidator(storable),
    ]


class ErrorOut(Schema):
    detail: str


class ValidationErrorOut(Schema):
    detail: str
    errors: list[dict[str, Any]] = []


ERRORS = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 422: ValidationErrorOut}


class PageQuery(Schema):
    limit: Annotated[int, Field(ge=1, le=paging.MAX_LIMIT)] = paging.DEFAULT_LIMIT
    cursor: Text(0, 1000) | None = None
