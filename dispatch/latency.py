"""Dispatch latency: from the instant work became ready to the moment its
poll's answer left, written to the histogram rows `/metrics` exports."""

import collections
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction

import audit
from audit.recording import bucket_of

if TYPE_CHECKING:
    from dispatch.claims import Handed

LATENCY = "croniq_dispatch_latency_seconds"


def latencies(handed: "Handed", at: datetime) -> list[float]:
    """Dispatch latency, in seconds, of each execution in `handed` whose
    answer leaves at `at`: from the instant it became ready (`run_after`) to
    that moment. Work claimed ahead is held until its instant, so its sample
    is what the hold, the event loop and the answer itself cost after it."""
    return [max(0.0, (at - ready).total_seconds()) for ready in handed.ready_at]


def record_latency(waits: Iterable[float]) -> None:
    """Add dispatch latency samples (seconds) to the histogram's rows.

    The same rows `audit.observe` writes, one increment per bucket rather
    than three per sample (a batch of 10 is 3-4 writes, not 30), in one
    transaction so a scrape never sees a bucket without its sum, and in a
    fixed order so concurrent writers never deadlock on them.
    """
    if not waits:
        return
    buckets = collections.Counter(bucket_of(w) for w in waits)
    with transaction.atomic():
        for le in sorted(buckets):
            audit.increment(f"{LATENCY}__bucket", buckets[le], le=le)
        audit.increment(f"{LATENCY}__count", len(waits))
        audit.increment(f"{LATENCY}__sum_us", round(sum(waits) * 1_000_000))
