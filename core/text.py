"""Text the database can store, as a type for API schemas.

PostgreSQL refuses a NUL in text and JSON, and no database takes a lone
surrogate (text that is not UTF-8); SQLite would store a NUL. A schema field
typed `Text(min, max)` refuses both with a 422 that names the field, instead
of a 500 from the driver, the same on either backend.
"""

from typing import Annotated, Any

from pydantic import AfterValidator, StrictStr, StringConstraints


def no_nul_or_surrogates(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return value


def Text(min_length: int = 0, max_length: int | None = None) -> Any:  # noqa: N802 - reads as a type in schemas
    return Annotated[
        StrictStr,
        StringConstraints(min_length=min_length, max_length=max_length),
        AfterValidator(no_nul_or_surrogates),
    ]
