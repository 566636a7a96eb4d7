"""A run's output within its `max_output` (docs/design.md §15): the head
and the tail of the log kept, and a line between them saying how many bytes
were cut.

The first half of the limit goes out as it comes. What follows is held
back: if the run ends within the limit it goes out whole at the end;
past the limit only its last half is kept, and at the end the log gets
the cut's line and that tail. Sizes are counted as the server counts them,
in UTF-8 bytes of the text sent (the output decoded, its secrets masked),
so the whole log fits the limit the server keeps. Not thread-safe: the
caller locks (logs.LogBatcher).

Standard library only.
"""

from collections import deque

from croniq_runner.sizes import shown

CUT_MARKER = "\n[croniq-runner: {cut} bytes of output cut here (max_output {limit})]\n"
# Room kept within the limit for that line.
MARKER_ROOM = 128
# The output's last characters, whatever is kept: what a failed run said
# last (its MemoryError), read when it ends.
RECENT = 4096


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def head_within(text: str, limit: int) -> tuple[str, str]:
    """(head, rest): the longest head of `text` within `limit` UTF-8 bytes."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return text, ""
    head = encoded[:limit].decode("utf-8", "ignore")
    return head, text[len(head) :]


def tail_within(text: str, limit: int) -> str:
    """The longest tail of `text` within `limit` UTF-8 bytes."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return text
    return encoded[len(encoded) - limit :].decode("utf-8", "ignore")


class OutputCap:
    """The part of a run's output its log keeps, fed text as it comes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        room = max(0, limit - MARKER_ROOM)
        self.head_room = room // 2
        self.tail_room = room - self.head_room
        self.total = 0  # bytes of output seen
        self.sent = 0  # bytes handed on
        # After the head: held until the end; once past the limit, the tail.
        self._held: deque[tuple[str, int]] = deque()
        self._held_bytes = 0
        self.recent = ""

    @property
    def exceeded(self) -> bool:
        """Whether the output has gone past the limit (some of it is cut)."""
        return self.total > self.limit

    @property
    def cut(self) -> int:
        """Bytes of output the log will not hold."""
        return self.total - self.sent - self._held_bytes

    def take(self, text: str) -> str:
        """What of `text` goes out now: the head's part; the rest is held."""
        if not text:
            return ""
        self.total += utf8_size(text)
        self.recent = (self.recent + text)[-RECENT:]
        out = ""
        if self.sent < self.head_room:
            out, text = head_within(text, self.head_room - self.sent)
            self.sent += utf8_size(out)
        if text:
            self._hold(text)
        return out

    def _hold(self, text: str) -> None:
        size = utf8_size(text)
        self._held.append((text, size))
        self._held_bytes += size
        if not self.exceeded:
            return
        # Past the limit: only the last `tail_room` bytes are kept.
        while self._held and self._held_bytes - self._held[0][1] >= self.tail_room:
            self._held_bytes -= self._held.popleft()[1]
        if self._held_bytes > self.tail_room:
            first, size = self._held.popleft()
            kept = tail_within(first, self.tail_room - (self._held_bytes - size))
            kept_size = utf8_size(kept)
            self._held_bytes += kept_size - size
            if kept:
                self._held.appendleft((kept, kept_size))

    def finish(self) -> str:
        """What is left to go out at the end of the run: the held output,
        after the cut's line when some was cut."""
        held = "".join(text for text, _ in self._held)
        marker = ""
        if self.exceeded:
            marker = CUT_MARKER.format(cut=self.cut, limit=shown(self.limit))
        self._held.clear()
        self.sent += self._held_bytes
        self._held_bytes = 0
        return marker + held
