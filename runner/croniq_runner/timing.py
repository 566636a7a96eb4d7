"""Retry pacing and lease deadlines for croniq-runner. Standard library only.

Both take their randomness and clock as arguments so tests need no sleeping.
"""

import random
import threading
import time
from collections.abc import Callable

# The longest pause between two tries of a call the server did not answer
# (refused, timed out, 5xx): after a web restart or a database failover the
# agent polls, reports and registers again within seconds of the server
# answering. With 30 s, work fired after a failover waited up to 30 s for
# the agent's next poll (bench/failover.py). A try costs the server little.
RETRY_CAP = 5.0


class Backoff:
    """Exponential backoff with jitter, capped.

    The n-th consecutive failure waits a random time in [d/2, d] where
    d = min(cap, base * 2**n): growing pauses, never zero, never in lockstep
    with other runners that lost the same server.
    """

    def __init__(
        self, base: float = 0.5, cap: float = RETRY_CAP, rand: Callable[[], float] = random.random
    ) -> None:
        self.base = base
        self.cap = cap
        self.rand = rand
        self.failures = 0

    def ceiling(self) -> float:
        exponent = min(self.failures, 60)
        return min(self.cap, self.base * 2**exponent)

    def next_delay(self) -> float:
        ceiling = self.ceiling()
        self.failures += 1
        return ceiling / 2 + self.rand() * ceiling / 2

    def reset(self) -> None:
        self.failures = 0


def fence_margin(lease_ttl: float) -> float:
    """How long before the server-side lease expiry the agent kills a job it
    could not renew: a third of the TTL, at most 10 s. A job killed at that
    point is dead before the server can re-dispatch it.
    """
    return min(lease_ttl / 3, 10.0)


def renewal_interval(heartbeat_interval: float, lease_ttl: float) -> float:
    """How often the agent renews its leases: at the server's pace, but at
    least twice within the time a lease stays alive locally (the TTL minus
    the fence margin), so one lost heartbeat never fences a healthy job.
    A server asking for 10 s heartbeats with 15 s leases gets them every 5 s.
    """
    return min(heartbeat_interval, (lease_ttl - fence_margin(lease_ttl)) / 2)


class LeaseBook:
    """Local deadlines of the leases this agent holds, on the monotonic clock.

    A renewal is anchored at the moment the heartbeat was *sent*: the server
    renewed after that, so its expiry is at least `sent_at + ttl` (no wall
    clocks compared across machines). The agent must have killed the job by
    `deadline = sent_at + ttl - margin`. Anchors are kept, not deadlines, so
    a shorter TTL learnt later applies to every lease at once.
    """

    def __init__(
        self,
        lease_ttl: float,
        margin: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lease_ttl = lease_ttl
        self.margin = fence_margin(lease_ttl) if margin is None else margin
        self.clock = clock
        self._anchors: dict[int, float] = {}
        self._lock = threading.Lock()

    def shorten(self, lease_ttl: float) -> bool:
        """The server now grants shorter leases (restarted with a smaller
        CRONIQ_LEASE_TTL). A longer TTL is ignored: fencing early is safe,
        fencing late is not."""
        with self._lock:
            if lease_ttl >= self.lease_ttl:
                return False
            self.lease_ttl = lease_ttl
            self.margin = fence_margin(lease_ttl)
            return True

    def renewed(self, execution_id: int, sent_at: float) -> None:
        with self._lock:
            # A late answer to an older heartbeat must not move the deadline back.
            self._anchors[execution_id] = max(sent_at, self._anchors.get(execution_id, sent_at))

    def forget(self, execution_id: int) -> None:
        with self._lock:
            self._anchors.pop(execution_id, None)

    def _deadline(self, anchor: float) -> float:
        return anchor + self.lease_ttl - self.margin

    def remaining(self, execution_id: int, now: float | None = None) -> float | None:
        now = self.clock() if now is None else now
        with self._lock:
            anchor = self._anchors.get(execution_id)
            return None if anchor is None else self._deadline(anchor) - now

    def overdue(self, now: float | None = None) -> list[int]:
        """Ids whose deadline has passed: their jobs must die now."""
        now = self.clock() if now is None else now
        with self._lock:
            return sorted(e for e, anchor in self._anchors.items() if self._deadline(anchor) <= now)


def wait_for_stop(event: threading.Event, interval: float = 0.5) -> None:
    """`event.wait()` for the main thread, which runs Python's signal handlers.

    A signal the kernel hands to another thread (the poll thread in a socket
    read, a job's thread) trips the handler but does not end a main-thread
    wait that has no timeout: SIGTERM would go unanswered until something
    else woke it. Waking every `interval` lets the handler run.
    """
    while not event.wait(interval):
        pass
