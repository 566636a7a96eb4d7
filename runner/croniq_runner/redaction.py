"""Secret values masked out of a run's output before the agent sends it.

The server lists a run's resolved secret values in its assignment
(`redact`). Each value of MIN_LENGTH characters or more is replaced by
`***` in the job's output wherever it appears encoded in UTF-8, however the
pipe cuts the output into reads. The Redactor works on the pipe's bytes,
before the log batcher decodes them: everything but a masked value reaches
the batcher byte for byte as the job wrote it, invalid UTF-8 included.

Standard library only.
"""

import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("croniq.runner")

MASK = b"***"
# Shorter values would mask ordinary words and numbers all over the log.
MIN_LENGTH = 4


def encoded(value: str) -> bytes:
    """`value` as the job sees it: the agent hands environment values to the
    job as os.fsencode does (UTF-8, lone surrogates from undecodable bytes
    back to those bytes)."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate fsencode cannot map back
        return value.encode("utf-8", "surrogatepass")


class Redactor:
    """Masks the listed values in a stream of bytes fed read by read.

    Every occurrence of every value is masked, overlapping ones too: output
    covered by overlapping occurrences (of one value or several) becomes a
    single `***`, so the longest value is never left half shown. Occurrences
    that only touch get one `***` each.

    A read may end in the middle of a value, so the bytes from the first
    position where the output's end could still begin a value are held back
    until the next read shows whether it does (at most the longest value's
    length less one byte), and `finish` hands them out at the end of the
    run. What `feed` returns never changes with what comes later, and the
    whole output fed in any cuts gives the same bytes as fed at once.
    """

    def __init__(self, values: Iterable[str]) -> None:
        patterns = {encoded(value) for value in values if len(value) >= MIN_LENGTH}
        self.patterns = sorted(patterns, key=len, reverse=True)
        self._held = b""
        # The first `_covered` bytes of `_held` are the end of a masked
        # stretch whose `***` is already out: an occurrence overlapping them
        # extends that stretch instead of writing a second `***`.
        self._covered = 0

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def feed(self, data: bytes) -> bytes:
        """The output that is settled once `data` has come."""
        if not self.patterns:
            return data
        buffer = self._held + data
        return self._release(buffer, self._hold_from(buffer))

    def finish(self) -> bytes:
        """The held bytes, masked: the run's output has ended."""
        buffer = self._held
        return self._release(buffer, len(buffer))

    def _occurrences(self, buffer: bytes) -> list[tuple[int, int]]:
        """(start, end) of every occurrence of every value, overlapping ones
        included, by start and at one start the longest first."""
        found = []
        for pattern in self.patterns:
            start = buffer.find(pattern)
            while start >= 0:
                found.append((start, start + len(pattern)))
                start = buffer.find(pattern, start + 1)
        found.sort(key=lambda span: (span[0], -span[1]))
        return found

    def _hold_from(self, buffer: bytes) -> int:
        """The first position whose rest of `buffer` is a value's beginning
        (shorter than the value); len(buffer) when there is none. What comes
        before it is settled: no later byte can start or lengthen an
        occurrence there."""
        size = len(buffer)
        hold = size
        for pattern in self.patterns:
            start = buffer.find(pattern[:1], max(0, size - len(pattern) + 1), hold)
            while start >= 0:
                if buffer.startswith(pattern[: size - start], start):
                    hold = start  # the earliest for this value; later ones start after
                    break
                start = buffer.find(pattern[:1], start + 1, hold)
        return hold

    def _release(self, buffer: bytes, cut: int) -> bytes:
        """`buffer[:cut]` masked; keeps `buffer[cut:]` for the next read."""
        out = bytearray()
        masked_to = self._covered  # buffer[:masked_to] is behind a `***` written
        for start, end in self._occurrences(buffer):
            if start >= cut:
                break
            if start < masked_to:  # overlaps the stretch being masked
                masked_to = max(masked_to, end)
                continue
            out += buffer[masked_to:start]
            out += MASK
            masked_to = end
        out += buffer[masked_to:cut]
        self._held = buffer[cut:]
        self._covered = max(0, masked_to - cut)
        return bytes(out)


def redactor_for(assignment: dict[str, Any]) -> Redactor | None:
    """The Redactor of a run's `redact` values; None when there is nothing to
    mask (a server that predates `redact` sends none), so the output goes
    out as it comes, not held back."""
    values = assignment.get("redact")
    if values is None:
        return None
    if not isinstance(values, list):
        log.warning(
            "execution %s: ignoring `redact`: a list of strings was expected, got %s",
            assignment.get("id"),
            type(values).__name__,
        )
        return None
    strings = [value for value in values if isinstance(value, str)]
    if len(strings) < len(values):
        log.warning(
            "execution %s: ignoring %d `redact` item(s) that are not strings",
            assignment.get("id"),
            len(values) - len(strings),
        )
    redactor = Redactor(strings)
    return redactor if redactor else None
