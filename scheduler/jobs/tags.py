"""A job's tags: short slugs operators group jobs by ("billing", "nightly",
"team-data"), to find them on the dashboard (`?tag=`), in the API's job list
and the admin, and to act on them together. Unlike labels, tags never decide
where a job runs.

The one reading of what a tag may be: the model's validator, apply, the API
and the admin all ask `problem` (docs/design.md §17)."""

import re
from collections import Counter
from typing import Any

from django.db.models import QuerySet

from core import db

# Lower case, so `?tag=Nightly` and `?tag=nightly` never name two groups;
# short enough for a badge on a job's row.
TAG_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,49}")
MAX_TAGS = 20
RULE = (
    "a tag is 1 to 50 lower-case letters, digits, '.', '_' and '-', starting with a letter or digit"
)


def problem(value: Any) -> tuple[str, str] | None:
    """What is wrong with a job's `tags` as (where, message), `where` the
    entry's index ("[1]") or "" for the whole list; None when it holds."""
    if not isinstance(value, list):
        return "", "expected a list of tags like [billing, nightly]"
    if len(value) > MAX_TAGS:
        return "", f"at most {MAX_TAGS} tags (got {len(value)})"
    seen = set()
    for index, tag in enumerate(value):
        if not isinstance(tag, str) or not TAG_RE.fullmatch(tag):
            shown = repr(tag) if len(repr(tag)) <= 60 else repr(tag)[:59] + "…"
            return f"[{index}]", f"{shown} is not a tag: {RULE}"
        if tag in seen:
            return f"[{index}]", f"{tag!r} is listed twice"
        seen.add(tag)
    return None


def validate_tags(value: Any) -> None:
    """The model field's validator; an entry is named by its index
    ("[1]: ..."), which apply's errors put after the field (`jobs[0].tags[1]`)."""
    from django.core.exceptions import ValidationError

    found = problem(value)
    if found is not None:
        where, message = found
        raise ValidationError(f"{where}: {message}" if where else message)


def carrying(jobs: QuerySet, tag: str) -> QuerySet:
    """The jobs of `jobs` tagged `tag`."""
    return db.list_holds(jobs, "tags", tag)


def in_use(jobs: QuerySet, limit: int = 200) -> list[str]:
    """The tags `jobs` carry, the most used first (then by name), at most
    `limit`: one read of every job's tags, a few thousand short lists."""
    counts = Counter(tag for row in jobs.values_list("tags", flat=True) for tag in row or [])
    return [tag for tag, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))][:limit]
