"""Batching of a job's output into `logs` calls, within its `max_output`
(output_cap.py). Standard library only."""

import codecs
import time
from collections import deque
from collections.abc import Callable

from croniq_runner.output_cap import OutputCap

# The server refuses chunks above 64 KiB; stay far below it, counting the
# UTF-8 bytes the server counts, not characters.
MAX_BATCH_BYTES = 16 * 1024
MAX_BATCH_AGE = 1.0
# Output kept in memory while the server is unreachable; the rest is dropped
# (and the log says so) rather than blocking the job on a full pipe.
MAX_BUFFERED_BYTES = 8 * 1024 * 1024

DROPPED_MARKER = "\n[croniq-runner: {n} bytes of output dropped while the server was unreachable]\n"


def split_utf8(text: str, limit: int) -> tuple[str, str]:
    """(head, tail): head is the longest prefix of `text` whose UTF-8 encoding
    fits in `limit` bytes, cut on a character boundary."""
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text, ""
    head = encoded[:limit].decode("utf-8", errors="ignore")
    return head, text[len(head) :]


class LogBatcher:
    """Collects output and hands it out in batches.

    A batch is ready when it holds `max_bytes` (UTF-8) or when its oldest
    byte has waited `max_age` seconds. With a `cap`, only what the run's
    log keeps within its max_output is batched (its head as it comes, its
    tail at the end). Not thread-safe: the caller locks.
    """

    def __init__(
        self,
        max_bytes: int = MAX_BATCH_BYTES,
        max_age: float = MAX_BATCH_AGE,
        max_buffered: int = MAX_BUFFERED_BYTES,
        clock: Callable[[], float] = time.monotonic,
        cap: OutputCap | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self.cap = cap
        self.max_age = max_age
        self.max_buffered = max_buffered
        self.clock = clock
        self._full: deque[str] = deque()
        self._current: list[str] = []
        self._current_bytes = 0
        self._current_since: float | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.buffered = 0
        self.dropped = 0

    def feed(self, data: bytes, final: bool = False) -> None:
        """Add raw bytes from the pipe; multi-byte characters may straddle calls."""
        # NUL as the server stores it (U+FFFD): counted so, the log fits its cap.
        text = self._decoder.decode(data, final).replace("\x00", "\ufffd")
        self.add(self.cap.take(text) if self.cap is not None else text)

    def add(self, text: str) -> None:
        if not text:
            return
        size = len(text.encode("utf-8"))
        if self.buffered + size > self.max_buffered:
            self.dropped += size
            return
        if self.dropped:
            marker, self.dropped = DROPPED_MARKER.format(n=self.dropped), 0
            self._append(marker)
        self._append(text)

    def _append(self, text: str) -> None:
        self.buffered += len(text.encode("utf-8"))
        while text:
            if self._current_since is None:
                self._current_since = self.clock()
            head, text = split_utf8(text, self.max_bytes - self._current_bytes)
            if not head and not self._current:
                head, text = text[0], text[1:]  # one character above max_bytes
            self._current.append(head)
            self._current_bytes += len(head.encode("utf-8"))
            if self._current_bytes >= self.max_bytes or (text and not head):
                self._close_current()

    def _close_current(self) -> None:
        if self._current:
            self._full.append("".join(self._current))
        self._current, self._current_bytes, self._current_since = [], 0, None

    def seconds_until_ready(self) -> float | None:
        """0 when a batch is ready, None when nothing is buffered."""
        if self._full:
            return 0.0
        if self._current_since is None:
            return None
        return max(0.0, self._current_since + self.max_age - self.clock())

    def take(self, force: bool = False) -> str | None:
        """The next ready batch (or, with `force`, whatever is left), else None."""
        if not self._full:
            wait = self.seconds_until_ready()
            if wait is None or (wait > 0 and not force):
                return None
            self._close_current()
        batch = self._full.popleft()
        self.buffered -= len(batch.encode("utf-8"))
        return batch

    def finish(self) -> None:
        """Flush the decoder (a trailing partial character becomes U+FFFD),
        hand on the output the cap held (the cut's line and the tail), and
        report any output dropped at the very end."""
        self.feed(b"", True)
        if self.cap is not None:
            self.add(self.cap.finish())
        if self.dropped:
            marker, self.dropped = DROPPED_MARKER.format(n=self.dropped), 0
            self._append(marker)
