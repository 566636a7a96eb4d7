"""Sizes as a job's limits write them (docs/design.md §15): `64MiB`,
`16KiB`, `1GiB`, or a whole number of bytes.

One reading and one way of writing, shared by the server (apply, the API,
the admin, export) and the agent (the error of a run past its limit), so a
size reads the same wherever it is written. Binary units only: `MB` would
mean 1000 x 1000 bytes to some and 1024 x 1024 to others, so it is refused
rather than guessed.

Standard library only.
"""

import re

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
TIB = 1024 * GIB
# Largest first: a size is written in the largest unit that divides it.
UNITS = (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB))
BY_NAME = {name.lower(): factor for name, factor in UNITS} | {"b": 1, "": 1}

SIZE_RE = re.compile(r"\s*(\d{1,20})\s*([A-Za-z]{0,3})\s*")
# Units people write that are not binary: named in the error.
DECIMAL = {
    short + suffix: binary
    for short, binary in (("k", "KiB"), ("m", "MiB"), ("g", "GiB"), ("t", "TiB"))
    for suffix in ("", "b")
}


HOW = "a whole number of bytes, or one followed by KiB, MiB or GiB (64MiB)"


class SizeError(ValueError):
    """Not a size; the message says what is (without the field's name)."""


def parse_size(value: object) -> int:
    """The bytes of `value`: a whole number (bytes) or text such as `64MiB`,
    `64 MiB`, `16KiB`, `1GiB`, `512B` or `1048576` (the unit's case does not
    matter). SizeError otherwise, quoting the value."""
    if isinstance(value, bool):
        raise SizeError(f"{value!r} is not a size: {HOW}")
    if isinstance(value, int):
        if value < 0:
            raise SizeError(f"{value} is not a size: it is below zero")
        return value
    if not isinstance(value, str):
        raise SizeError(f"{shown_value(value)} is not a size: {HOW}")
    match = SIZE_RE.fullmatch(value)
    if match is None:
        raise SizeError(f"{shown_value(value)} is not a size: {HOW}")
    number, unit = int(match.group(1)), match.group(2).lower()
    if unit in BY_NAME:
        return number * BY_NAME[unit]
    if unit in DECIMAL:
        raise SizeError(
            f"{shown_value(value)} is not a size: units are binary, write "
            f"{number}{DECIMAL[unit]} ({number} x {BY_NAME[DECIMAL[unit].lower()]} bytes)"
        )
    raise SizeError(f"{shown_value(value)} is not a size: {HOW}")


def shown_value(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def written(size: int) -> int | str:
    """`size` as an apply file writes it: in the largest unit that divides
    it (`64MiB`), else the bytes as a number. `parse_size` reads it back."""
    for name, factor in UNITS:
        if size and size % factor == 0:
            return f"{size // factor}{name}"
    return size


def shown(size: int) -> str:
    """`size` for people, exact: `64 MiB`, `1 GiB`, `1000 bytes`."""
    for name, factor in UNITS:
        if size and size % factor == 0:
            return f"{size // factor} {name}"
    return f"{size} byte" if size == 1 else f"{size} bytes"
