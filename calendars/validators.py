import zoneinfo
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models


def validate_timezone(value: str) -> None:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            f"{value!r} is not a known IANA timezone (for example Europe/Berlin or UTC)."
        ) from None


# Text a database cannot store: PostgreSQL refuses NUL in text and JSON, and
# no database takes a lone surrogate (text that is not UTF-8). SQLite would
# store a NUL, so both backends refuse the same input, with the field named
# instead of a 500 from the driver.
NUL_PROBLEM = "must not contain NUL characters"
SURROGATE_PROBLEM = "must be valid Unicode text (no lone surrogates)"


def text_problem(value: str) -> str:
    """Why the string `value` cannot be stored, or ""."""
    if "\x00" in value:
        return NUL_PROBLEM
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return SURROGATE_PROBLEM
    return ""


def text_problems(value: Any, where: str = "") -> list[tuple[str, str]]:
    """[(where, problem)]: each string in `value` (text, or JSON: lists and
    mappings, their keys too) that cannot be stored, named as the apply file
    names fields from `where` on (`env.API_URL`, `labels[0]`)."""
    if isinstance(value, str):
        problem = text_problem(value)
        return [(where, problem)] if problem else []
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in text_problems(item, f"{where}[{i}]")]
    if not isinstance(value, dict):
        return []
    found = []
    for key, item in value.items():
        problem = text_problem(key) if isinstance(key, str) else ""
        if problem:
            # The key cannot name the place: shown escaped, as ASCII.
            found.append((where, f"the name {ascii(key)} {problem}"))
        else:
            found += text_problems(item, f"{where}.{key}" if where else str(key))
    return found


def stored_text_errors(instance: models.Model) -> dict[str, str]:
    """{field name: message} for the text and JSON fields of a model instance
    holding text the database cannot store; for a model's clean()."""
    errors = {}
    for field in instance._meta.concrete_fields:
        if not isinstance(field, models.CharField | models.TextField | models.JSONField):
            continue
        problems = text_problems(field.value_from_object(instance))
        if problems:
            errors[field.name] = "; ".join(
                f"{where}: {problem}" if where else problem for where, problem in problems
            )
    return errors


def validate_stored_text(instance: models.Model) -> None:
    """ValidationError naming each field of `instance` whose text cannot be stored."""
    errors = stored_text_errors(instance)
    if errors:
        raise ValidationError(errors)
