"""A job's run statistics over a window of days: duration percentiles and
success rate. Pure functions; `run_stats.run_stats` fills them from the
database."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import ceil, floor

PERCENTILES = (0.5, 0.95, 0.99)


def percentile(ordered: Sequence[float], fraction: float) -> float | None:
    """The `fraction` percentile of sorted values, interpolating between the
    two nearest (as PostgreSQL's percentile_cont); None without values."""
    if not ordered:
        return None
    position = fraction * (len(ordered) - 1)
    low, high = ordered[floor(position)], ordered[ceil(position)]
    return low + (high - low) * (position - floor(position))


def percentiles(
    values: Iterable[float], fractions: Iterable[float] = PERCENTILES
) -> list[float | None]:
    ordered = sorted(values)
    return [percentile(ordered, fraction) for fraction in fractions]


def success_rate(succeeded: int, settled: int) -> float | None:
    """The share of settled runs that succeeded; None before any settled."""
    return succeeded / settled if settled else None


@dataclass
class WindowStats:
    """The runs scheduled in the last `days` days. `settled`: succeeded or
    failing (failed, timed out, lost; cancelled and skipped runs are no
    verdict on the job). Percentiles over the finished runs with a duration;
    `sampled` when they cover only the newest of them."""

    days: int
    settled: int = 0
    succeeded: int = 0
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    sampled: bool = False

    @property
    def success_rate(self) -> float | None:
        return success_rate(self.succeeded, self.settled)

    @property
    def failed(self) -> int:
        return self.settled - self.succeeded
