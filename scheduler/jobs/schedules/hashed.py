"""Jenkins' hash forms of the minute and hour fields: H, H(a-b), H/n, H(a-b)/n.

A value chosen by a stable hash of the job's name, so jobs spread out and
each keeps its minute.
"""

from __future__ import annotations

import hashlib
import re

from scheduler.jobs.schedules.errors import ScheduleError

HASH_RE = re.compile(r"^H(?:\((\d+)-(\d+)\))?(?:/(\d+))?$", re.IGNORECASE)


def uses_key(text: object) -> bool:
    """Whether the minute or hour field holds an `H` form (its values depend on the key)."""
    fields = text.split() if isinstance(text, str) else []
    return len(fields) == 5 and any(i[:1] in "hH" for f in fields[:2] for i in f.split(","))


def hashed_values(item: str, name: str, lo: int, hi: int, key: str | None) -> set[int]:
    """Jenkins' `H`: a value of the field (or of `H(a-b)`) chosen by a stable
    hash of the key, so jobs spread out and each keeps its minute; `H/n` is
    every n from a hashed offset."""
    if name not in ("minute", "hour"):
        raise ScheduleError(f"{name} field: H is only for the minute and hour fields")
    match = HASH_RE.match(item)
    if not match:
        raise ScheduleError(
            f"{name} field: {item!r} is not a hash form: use H, H(a-b), H/n or H(a-b)/n"
        )
    if not key:
        raise ScheduleError(f"{name} field: H needs the job's name to hash, and none was given")
    a, b, step_text = match.groups()
    first, last = (int(a), int(b)) if a is not None else (lo, hi)
    for value in (first, last):
        if not lo <= value <= hi:
            raise ScheduleError(f"{name} field: {value} is out of range {lo}-{hi}")
    if first > last:
        raise ScheduleError(f"{name} field: range {item} runs backwards")
    digest = hashlib.sha256(f"{name}\x00{key}".encode()).digest()  # never hash(): per process
    hashed = int.from_bytes(digest[:8], "big")
    size = last - first + 1
    if step_text is None:
        return {first + hashed % size}
    step = int(step_text)
    if step < 1:
        raise ScheduleError(f"{name} field: step {step_text!r} must be a whole number >= 1")
    return set(range(first + hashed % min(step, size), last + 1, step))


def resolved_field(values: set[int], field: str) -> str:
    """A minute or hour field as croniter reads it: H forms resolved."""
    if not any(item[:1] in "hH" for item in field.split(",")):
        return field
    return ",".join(map(str, sorted(values)))
