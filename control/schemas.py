"""Shapes shared by the management API's calls: text that the database can
store, the error bodies (docs/design.md §4) and the paging query (§8)."""

from typing import Annotated, Any

from ninja import Field, Schema

from control import paging
from core.text import Text  # text the database can store: no NUL, no lone surrogates


class ErrorOut(Schema):
    detail: str


class ValidationErrorOut(Schema):
    detail: str
    errors: list[dict[str, Any]] = []


ERRORS = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 422: ValidationErrorOut}


class PageQuery(Schema):
    limit: Annotated[int, Field(ge=1, le=paging.MAX_LIMIT)] = paging.DEFAULT_LIMIT
    cursor: Text(0, 1000) | None = None
