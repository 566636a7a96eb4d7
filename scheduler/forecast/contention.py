"""Contention: what an average per quarter hour hides. Two 44-second runs
due at the same instant on a one-slot runner average far below one run at
once over a quarter hour, yet the second starts 44 s late. This module
places runs one by one: the peak of runs going on at once, and each run's
start delay when the runs due on a label set outnumber its runners' slots.

Pure: no database, no clock. A label set's runs queue on its own slots, in
the order they are due (first come, first served, as the runners claim the
oldest due run first); a runner that carries two label sets counts for both,
as in the forecast's demand. `replay` takes runs at instants (the day's real
runs, or the forecast's); `queue_delays` and `bucket_peaks` are its parts the
forecast uses on seconds from its window's start.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

Labels = tuple[str, ...]


@dataclass(frozen=True)
class DueRun:
    """A run as the queue sees it: its job's label set, the instant it is
    due (scheduled_for) and how long it holds a slot, in seconds."""

    labels: Labels
    at: datetime
    seconds: float


@dataclass(frozen=True)
class Replay:
    """`delays`: each run's start delay in seconds, in the order given
    (None: no runner taking work carries its labels, it never starts);
    `peaks`: per label set, the most runs due and not yet over at once,
    waiting ones included (the slots they would need to start on time)."""

    delays: list[float | None]
    peaks: dict[Labels, int]


def replay(runs: Sequence[DueRun], slots: Mapping[Labels, int]) -> Replay:
    """Queue `runs` on the `slots` of each label set (absent: none)."""
    if not runs:
        return Replay([], {})
    origin = min(run.at for run in runs)
    by_set: defaultdict[Labels, list[int]] = defaultdict(list)
    for i, run in enumerate(runs):
        if run.seconds < 0:
            raise ValueError(f"seconds: a run cannot last {run.seconds} s")
        by_set[run.labels].append(i)
    delays: list[float | None] = [None] * len(runs)
    peaks: dict[Labels, int] = {}
    for labels, indices in by_set.items():
        timed = [((runs[i].at - origin).total_seconds(), runs[i].seconds) for i in indices]
        for i, delay in zip(indices, queue_delays(timed, slots.get(labels, 0)), strict=True):
            delays[i] = delay
        peaks[labels] = peak_at_once(timed)
    return Replay(delays, peaks)


def queue_delays(runs: Sequence[tuple[float, float]], slots: int) -> list[float | None]:
    """Start delays of `runs` ((due, seconds), in seconds) queued on `slots`
    slots in the order they are due (ties in the order given); None for
    every run when there is no slot."""
    if slots <= 0:
        return [None] * len(runs)
    order = sorted(range(len(runs)), key=lambda i: runs[i][0])  # stable: ties keep their order
    free = [-math.inf] * slots  # when each slot is free again: a heap
    delays: list[float | None] = [0.0] * len(runs)
    for i in order:
        due, seconds = runs[i]
        start = max(due, free[0])
        delays[i] = float(start - due)
        heapq.heapreplace(free, start + seconds)
    return delays


def peak_at_once(runs: Sequence[tuple[float, float]]) -> int:
    """The most `runs` ((due, seconds)) going on at once, each over
    [due, due + seconds): one ending as another is due does not overlap it."""
    level = peak = 0
    for _at, step in events(runs):
        level += step
        peak = max(peak, level)
    return peak


def bucket_peaks(
    runs: Sequence[tuple[float, float]], count: int, size: float, origin: float = 0.0
) -> list[int]:
    """Per bucket of `size` seconds from `origin` (`count` of them), the most
    `runs` ((due, seconds)) going on at once in it, those that began before
    it included."""
    peaks = [0] * count
    level = 0
    pending = 0  # the first bucket whose level at its start is not yet recorded
    for at, step in events(runs):
        # Every bucket begun before this instant starts at the level so far.
        while pending < count and origin + pending * size < at:
            peaks[pending] = max(peaks[pending], level)
            pending += 1
        level += step
        index = math.floor((at - origin) / size)
        if step > 0 and 0 <= index < count:
            peaks[index] = max(peaks[index], level)
    for rest in range(pending, count):
        peaks[rest] = max(peaks[rest], level)
    return peaks


def events(runs: Sequence[tuple[float, float]]) -> list[tuple[float, int]]:
    """(instant, +1 or -1) of the runs' starts and ends, in order: an end
    before a start at the same instant (-1 < 1), so a slot freed as a run
    is due serves it; a zero-second run ends just after it is due."""
    found: list[tuple[float, int]] = []
    for due, seconds in runs:
        found.append((due, 1))
        found.append((due + seconds if seconds > 0 else math.nextafter(due, math.inf), -1))
    found.sort()
    return found
