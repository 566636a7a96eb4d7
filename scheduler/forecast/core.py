"""The capacity forecast's pure core: `forecast_load` takes `now`, the jobs
as `JobLoad` values (where their fire instants come from, their labels, how
long a run takes) and the runners as `RunnerSlots`, and returns a `Forecast`.
No database, no clock.

Demand in a bucket is the expected number of runs going on in it: the sum,
over runs, of the part of the bucket each run covers, divided by the bucket's
length (a 20-minute run starting at 02:07 adds 8/15 to 02:00-02:15 and
12/15 to 02:15-02:30), each job's overlap policy applied. A concurrency
group's budget is not: runs beyond it are counted at their own instants,
though they will wait for a place in the group. A label set is over
capacity in a bucket when its demand exceeds the slots of the runners that
carry it (DESIGN §4 matching: the runner's labels include the job's). Each
label set is compared with its runners on its own: a runner serving two
label sets counts for both.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict, deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from calendars.rules import CalendarRules
from scheduler.forecast.contention import bucket_peaks, queue_delays

BUCKET = timedelta(minutes=15)
HOURS = 24
# A run's expected duration is the median of the job's newest successful
# runs (at most this many). The median, not the mean or p95: the forecast
# places every run of the day at once, so it wants the typical run; one run
# stuck for hours must not make every future run of the job look that long,
# and a p95 per job summed over many jobs pictures an hour where every job is
# slow at once.
HISTORY_RUNS = 20
# A job without a successful run yet is expected to take its timeout (the
# longest it may hold a slot) when it has one, else this many seconds.
DEFAULT_SECONDS = 60.0
# Runs enumerated one by one per schedule, at most. Cron fires at most once a
# minute (1,440 a day), so a day of any cron schedule fits, hours and
# weekdays as written; jobs sharing a schedule share its enumeration. An
# `@every` job (`@every 1s` is 86,400 runs a day) is enumerated up to
# EVERY_RUNS (its first runs exact) and takes the rest of the window
# at its steady rate instead: `duration / interval` runs at once (Little's
# law), inside its calendar's allowed time. Its rate is the same at every
# hour, and at 15-minute buckets the run-by-run detail of a job that fires
# several times a bucket is invisible anyway.
ENUMERATED_RUNS = 1_500
EVERY_RUNS = 16
# Demand this close above capacity is rounding, not a shortage.
EPSILON = 1e-6
# Overlap policies (scheduler.models.Job.OVERLAPS).
ALLOW, SKIP, QUEUE, REPLACE = "allow", "skip", "queue", "replace"


@dataclass(frozen=True)
class JobLoad:
    """What the forecast needs of one job.

    `fires(after)` yields the job's fire instants strictly after `after`, in
    order (`schedule_fires`: the loop's own next-fire math, calendar and
    policy applied). Jobs with the same `key` fire at the
    same instants (a cron schedule on the same clock, calendar and policy),
    so their instants are enumerated once. `every` is an `@every` job's
    interval (its rate past the cap), `calendar` its CalendarRules (where
    the steady rate applies). `overlap`, `max_concurrent` and `max_queue`
    are the job's overlap policy (DESIGN §10, `scheduler.runs.overlap`): an
    occurrence due while runs are live runs alongside (allow), is skipped
    (skip), waits for a slot of `max_concurrent` up to `max_queue` waiting
    (queue), or cuts the live run short (replace).
    """

    name: str
    labels: tuple[str, ...]
    seconds: float
    fires: Callable[[datetime], Iterator[datetime]]
    every: timedelta | None = None
    calendar: CalendarRules | None = None
    overlap: str = ALLOW
    max_concurrent: int | None = None
    max_queue: int | None = None
    key: Hashable = None
    # No run after `ends` (`not_after`), at most `runs` more (`max_runs`):
    # the steady rate past the cap stops there too.
    ends: datetime | None = None
    runs: int | None = None


@dataclass(frozen=True)
class RunnerSlots:
    """A runner as the forecast counts it: `takes_work` is False for an
    offline or drained runner, which adds no slots."""

    name: str
    labels: frozenset[str]
    capacity: int
    takes_work: bool = True


@dataclass
class Span:
    """Consecutive buckets where a label set's demand exceeds its slots."""

    start: datetime
    end: datetime
    peak: float
    capacity: int
    labels: tuple[str, ...]

    @property
    def slots_needed(self) -> int:
        """The peak as whole slots (13.2 runs at once need 14 slots)."""
        return math.ceil(self.peak - EPSILON)


@dataclass
class LabelForecast:
    """One label set: demand and capacity per bucket, and the spans over it."""

    labels: tuple[str, ...]
    jobs: int
    demand: list[float]
    capacity: list[int]
    spans: list[Span] = field(default_factory=list)
    # Run by run (scheduler.forecast.contention), per bucket: the most runs
    # going on at once, waiting ones included, and the longest start delay
    # in seconds of the runs due in it (None: no slot carries the labels).
    # Runs past the enumeration cap (an `@every` job's steady rate) are in
    # the demand only.
    peak_runs: list[int] = field(default_factory=list)
    delay: list[float | None] = field(default_factory=list)

    @property
    def peak(self) -> float:
        return max(self.demand, default=0.0)

    @property
    def most_at_once(self) -> int:
        return max(self.peak_runs, default=0)

    @property
    def longest_delay(self) -> float | None:
        """The longest start delay over the window (None: no slot at all)."""
        if any(delay is None for delay in self.delay):
            return None
        return max((delay for delay in self.delay if delay is not None), default=0.0)

    @property
    def waits(self) -> list[Wait]:
        """The buckets where runs wait for a slot, earliest first (a label
        set no runner carries is over capacity already: not repeated here)."""
        return [
            Wait(i, self.labels, peak, slots, delay)
            for i, (peak, slots, delay) in enumerate(
                zip(self.peak_runs, self.capacity, self.delay, strict=True)
            )
            if delay is not None and delay > EPSILON
        ]


@dataclass(frozen=True)
class Wait:
    """A bucket (its index) where runs of a label set wait: `peak` runs at
    once on `capacity` slots, the longest waiting `delay` seconds (None:
    no runner carries the labels)."""

    bucket: int
    labels: tuple[str, ...]
    peak: int
    capacity: int
    delay: float | None


@dataclass
class Forecast:
    now: datetime
    start: datetime  # the first bucket's start (now, rounded down to a bucket)
    bucket: timedelta
    buckets: int
    label_sets: list[LabelForecast]  # by labels
    skipped: dict[str, str]  # {job name: why it could not be forecast}

    @property
    def starts(self) -> list[datetime]:
        return [self.start + i * self.bucket for i in range(self.buckets)]

    @property
    def end(self) -> datetime:
        return self.start + self.buckets * self.bucket

    def start_of(self, bucket: int) -> datetime:
        return self.start + bucket * self.bucket

    @property
    def waits(self) -> list[Wait]:
        """Every bucket of every label set where runs wait, earliest first."""
        found = [wait for forecast in self.label_sets for wait in forecast.waits]
        return sorted(found, key=lambda wait: (wait.bucket, wait.labels))

    @property
    def spans(self) -> list[Span]:
        """Every span of every label set, earliest first."""
        found = [span for forecast in self.label_sets for span in forecast.spans]
        return sorted(found, key=lambda span: (span.start, span.labels))


def forecast_load(
    now: datetime,
    jobs: Iterable[JobLoad],
    runners: Sequence[RunnerSlots],
    hours: float = HOURS,
    bucket: timedelta = BUCKET,
    cap: int = ENUMERATED_RUNS,
) -> Forecast:
    """A `Forecast` of `jobs` (JobLoad) against `runners` (RunnerSlots)
    from `now`'s bucket over `hours` hours (its last bucket holds now + hours)."""
    start = floor_to(now, bucket)
    count = math.ceil((now + timedelta(hours=hours) - start) / bucket)
    window = Window(start, count, bucket.total_seconds())
    demand: defaultdict[tuple[str, ...], list[float]] = defaultdict(window.empty)
    jobs_per_set: defaultdict[tuple[str, ...], int] = defaultdict(int)
    due: defaultdict[tuple[str, ...], list[tuple[float, float]]] = defaultdict(list)
    skipped: dict[str, str] = {}
    for group in grouped(jobs):
        try:
            instants = window.instants(group, cap)
            if instants.rest_from is not None:
                window.allowed(group[0].calendar, instants.rest_from)  # read its calendar here
        except ValueError as e:  # ScheduleError, RulesError: the loop quarantines such a job
            skipped.update((job.name, str(e)) for job in group)
            continue
        for job in group:
            add_job(demand[job.labels], window, job, instants, due[job.labels])
            jobs_per_set[job.labels] += 1
    label_sets = []
    for labels in sorted(demand):
        slots = capacity_of(labels, runners)
        label_forecast = LabelForecast(
            labels, jobs_per_set[labels], demand[labels], [slots] * count
        )
        label_forecast.spans = over_capacity(label_forecast, window)
        label_forecast.peak_runs, label_forecast.delay = contention(due[labels], window, slots)
        label_sets.append(label_forecast)
    return Forecast(now, start, bucket, count, label_sets, skipped)


def floor_to(instant: datetime, step: timedelta) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + ((instant - epoch) // step) * step


def grouped(jobs: Iterable[JobLoad]) -> Iterable[list[JobLoad]]:
    """Jobs in groups sharing their fire instants (`key`); no key, no sharing."""
    groups: defaultdict[Hashable, list[JobLoad]] = defaultdict(list)
    for i, job in enumerate(jobs):
        groups[job.key if job.key is not None else ("job", i)].append(job)
    return groups.values()


class Instants:
    """A group's fire instants as seconds from the window's start, and where
    the enumeration stopped: `rest_from` (seconds) when the cap was reached
    before the window's end, with `rate` (runs a second) for the rest."""

    def __init__(
        self,
        seconds: list[float],
        rest_from: float | None = None,
        rate: float | None = None,
        rest_until: float = math.inf,
    ) -> None:
        self.seconds = seconds
        self.rest_from = rest_from
        self.rate = rate
        self.rest_until = rest_until  # the rest stops here (a job's bound or last run)


@dataclass
class Window:
    start: datetime
    count: int
    bucket_seconds: float
    # {id(calendar): (the calendar, kept alive, [(start, end)] seconds it allows)}
    _stretches: dict[int, tuple[Any, list[tuple[float, float]]]] = field(default_factory=dict)

    @property
    def length(self) -> float:
        return self.count * self.bucket_seconds

    @property
    def end(self) -> datetime:
        return self.start + timedelta(seconds=self.length)

    def empty(self) -> list[float]:
        return [0.0] * self.count

    def offset(self, instant: datetime) -> float:
        return (instant - self.start).total_seconds()

    def instants(self, group: list[JobLoad], cap: int) -> Instants:
        """The group's fire instants from the longest run's lookback before
        the window (runs started then still go on in it) to its end."""
        first = group[0]
        if first.every is not None:
            cap = min(cap, EVERY_RUNS)
        lookback = timedelta(seconds=min(max(job.seconds for job in group), self.length))
        found: list[float] = []
        end = self.end
        for instant in first.fires(self.start - lookback):
            if instant >= end:
                return Instants(found)
            if len(found) == cap:
                rest_from, rate = self.offset(instant), self.rate(first, found)
                return Instants(
                    found, rest_from, rate, self.rest_until(first, rest_from, rate, cap)
                )
            found.append(self.offset(instant))
        return Instants(found)

    def rest_until(self, job: JobLoad, rest_from: float, rate: float, cap: int) -> float:
        """Where a job's steady rate stops: its `ends`, or when its `runs`
        left past the enumerated ones are spent."""
        until = math.inf if job.ends is None else self.offset(job.ends)
        if job.runs is not None and rate > 0:
            until = min(until, rest_from + max(job.runs - cap, 0) / rate)
        return until

    @staticmethod
    def rate(job: JobLoad, found: list[float]) -> float:
        """Runs a second past the cap: an `@every` job's own, else the pace
        the enumerated runs kept."""
        if job.every is not None:
            return 1 / job.every.total_seconds()
        span = found[-1] - found[0]
        return (len(found) - 1) / span if span > 0 else 0.0

    def allowed(self, calendar: CalendarRules | None, since: float) -> list[tuple[float, float]]:
        """[(start, end)] seconds of the window from `since` on that
        `calendar` allows (the whole rest without a calendar)."""
        if calendar is None:
            return [(since, self.length)]
        key = id(calendar)
        if key not in self._stretches:
            stretches = calendar.allowed_stretches(self.start, self.count * 4, horizon=self.end)
            self._stretches[key] = (
                calendar,  # kept alive, so its id is not reused
                [
                    (self.offset(s), self.length if e is None else min(self.offset(e), self.length))
                    for s, e in stretches
                ],
            )
        return [
            (max(s, since), e) for s, e in self._stretches[key][1] if e > since and s < self.length
        ]


def add_job(
    demand: list[float],
    window: Window,
    job: JobLoad,
    instants: Instants,
    due: list[tuple[float, float]] | None = None,
) -> None:
    """Add one job's runs to its label set's `demand`, bucket by bucket,
    and to `due` as (start, seconds) for the queue."""
    size = window.bucket_seconds
    count = window.count
    # Past the cap the steady rate counts every run going on, the tails of
    # the enumerated runs included.
    until = math.inf if instants.rest_from is None else instants.rest_from
    for start, end in runs(job, instants.seconds):
        if due is not None:
            due.append((start, end - start))
        end = min(end, until)
        if end <= 0:
            continue  # over before the window
        first, last = int(start // size), int(end // size)
        if first == last:  # most runs: inside one bucket
            if 0 <= first < count:
                demand[first] += (end - start) / size
            continue
        if 0 <= first < count:
            demand[first] += first + 1 - start / size
        for i in range(max(first + 1, 0), min(last, count)):
            demand[i] += 1.0  # the buckets it covers whole
        if last < count:
            demand[last] += end / size - last
    if instants.rest_from is not None:
        add_steady(demand, window, job, instants)


def runs(job: JobLoad, instants: list[float]) -> Iterator[tuple[float, float]]:
    """(start, end) of the runs the job's overlap policy makes of its
    occurrences at `instants` (seconds, in order)."""
    seconds = job.seconds
    if job.overlap == SKIP:
        busy_until = -math.inf
        for at in instants:
            if at >= busy_until:  # else its previous run still goes on: skipped
                busy_until = at + seconds
                yield at, busy_until
    elif job.overlap == REPLACE:
        # Each run is cut short by the next occurrence, which then starts.
        for at, after in zip(instants, [*instants[1:], math.inf], strict=True):
            yield at, min(at + seconds, after)
    elif job.overlap == QUEUE:
        yield from queued_runs(instants, seconds, job.max_concurrent or 1, job.max_queue)
    else:
        for at in instants:
            yield at, at + seconds


def queued_runs(
    instants: list[float], seconds: float, slots: int, max_queue: int | None
) -> Iterator[tuple[float, float]]:
    """Runs of a queue job: at most `slots` at once, the others waiting in
    the order of their instants, skipped when `max_queue` already wait."""
    free = [-math.inf] * slots  # when each slot is free again: a heap
    waiting: deque[float] = deque()  # starts still to come of the runs that wait
    for at in instants:
        while waiting and waiting[0] <= at:
            waiting.popleft()
        start = max(at, free[0])
        if start > at:
            if max_queue is not None and len(waiting) >= max_queue:
                continue  # the queue is full: skipped
            waiting.append(start)
        heapq.heapreplace(free, start + seconds)
        yield start, start + seconds


def add_steady(demand: list[float], window: Window, job: JobLoad, instants: Instants) -> None:
    """Past the cap: the job's runs at a steady rate inside allowed time."""
    if not instants.rate or instants.rest_from is None:  # add_job calls it past the cap only
        return
    density = steady_density(job, 1 / instants.rate)
    size = window.bucket_seconds
    for low, high in window.allowed(job.calendar, instants.rest_from):
        high = min(high, instants.rest_until)
        i = max(int(low // size), 0)
        while i < window.count and i * size < high:
            demand[i] += density * (min(high, (i + 1) * size) - max(low, i * size)) / size
            i += 1


def steady_density(job: JobLoad, interval: float) -> float:
    """Runs going on at once of a job started every `interval` seconds."""
    seconds = job.seconds
    if job.overlap == SKIP:
        # A run skips the occurrences it covers: one run per whole number
        # of intervals its duration spans.
        return seconds / (interval * max(math.ceil(seconds / interval - EPSILON), 1))
    if job.overlap == REPLACE:
        return min(seconds, interval) / interval
    if job.overlap == QUEUE:
        # The queue grows (or, full, skips) past its slots: never more at once.
        return min(seconds / interval, job.max_concurrent or 1)
    return seconds / interval


def capacity_of(labels: tuple[str, ...], runners: Sequence[RunnerSlots]) -> int:
    """The slots of the runners taking work that carry all of `labels`."""
    wanted = set(labels)
    return sum(r.capacity for r in runners if r.takes_work and wanted <= set(r.labels))


def contention(
    due: list[tuple[float, float]], window: Window, slots: int
) -> tuple[list[int], list[float | None]]:
    """Per bucket: the most runs at once, and the longest start delay of
    the runs due in it when they queue on the label set's `slots`."""
    peaks = bucket_peaks(due, window.count, window.bucket_seconds)
    longest: list[float | None] = [0.0] * window.count
    for (at, _seconds), delay in zip(due, queue_delays(due, slots), strict=True):
        index = int(at // window.bucket_seconds)
        if not 0 <= index < window.count:
            continue  # due before the window: it only holds a slot
        current = longest[index]
        if delay is None or current is None:
            longest[index] = None
        else:
            longest[index] = max(current, delay)
    return peaks, longest


def over_capacity(label_forecast: LabelForecast, window: Window) -> list[Span]:
    """[Span] the runs of buckets where demand exceeds capacity."""
    spans: list[Span] = []
    current: Span | None = None
    for i, (load, slots) in enumerate(
        zip(label_forecast.demand, label_forecast.capacity, strict=True)
    ):
        if load <= slots + EPSILON:
            current = None
            continue
        start = window.start + i * timedelta(seconds=window.bucket_seconds)
        end = start + timedelta(seconds=window.bucket_seconds)
        if current is None:
            current = Span(start, end, load, slots, label_forecast.labels)
            spans.append(current)
        else:
            current.end = end
            current.peak = max(current.peak, load)
            current.capacity = min(current.capacity, slots)
    return spans
