"""Geometry of the dashboard's inline SVG charts, drawn server side: run
durations on a time axis (job page), the failure heat-map of the last
hours (overview) and the capacity forecast's demand against the runners'
slots (capacity page). Pure functions of their rows and `now`."""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from scheduler.forecast import EPSILON, LabelForecast

WIDTH = 720
HEIGHT = 180
TOP = 10
BOTTOM = 24  # room for the time axis labels
LEFT = 52
RIGHT = 12
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
# The narrowest span the time axis shows: a single run still sits in context.
MIN_SPAN = HOUR
MAX_TICKS = 6
TICK_STEPS = [
    HOUR,
    2 * HOUR,
    3 * HOUR,
    6 * HOUR,
    12 * HOUR,
    DAY,
    2 * DAY,
    7 * DAY,
    14 * DAY,
    30 * DAY,
    91 * DAY,
    365 * DAY,
]
# Ticks count steps from a Monday midnight: weekly ticks fall on Mondays.
EPOCH = datetime(1970, 1, 5, tzinfo=UTC)


def format_seconds(seconds: float) -> str:
    if seconds == 0:
        return "0 s"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


# Durations over time


class DurationRun(NamedTuple):
    """A finished run as the chart needs it (run_stats.duration_runs)."""

    pk: int
    state: str
    started_at: datetime
    seconds: float
    failed: bool


@dataclass
class Point:
    x: float
    y: float
    run: DurationRun


@dataclass
class Tick:
    x: float
    label: str


@dataclass
class DurationChart:
    points: list
    ticks: list
    max_seconds: float
    start: datetime
    end: datetime
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    baseline: int = HEIGHT - BOTTOM
    right: int = WIDTH - RIGHT

    @property
    def max_label(self) -> str:
        return format_seconds(self.max_seconds)

    @property
    def failures(self) -> int:
        return sum(1 for point in self.points if point.run.failed)


def duration_chart(runs: Sequence[DurationRun], now: datetime) -> DurationChart | None:
    """Each run a point at its start time (x, from the oldest run to `now`)
    and its duration (y, from 0 to the longest); None without runs."""
    if not runs:
        return None
    start, end = time_span([run.started_at for run in runs], now)
    top = max(max(run.seconds for run in runs), 0.001)
    plot_height = HEIGHT - BOTTOM - TOP
    points = [
        Point(
            x=time_x(run.started_at, start, end),
            y=round(HEIGHT - BOTTOM - plot_height * max(run.seconds, 0) / top, 2),
            run=run,
        )
        for run in runs
    ]
    return DurationChart(
        points=points, ticks=time_ticks(start, end), max_seconds=top, start=start, end=end
    )


def time_span(instants: Sequence[datetime], now: datetime) -> tuple[datetime, datetime]:
    """(start, end) of the time axis: the oldest instant to `now` (or the
    newest instant, should a clock run ahead), at least MIN_SPAN wide."""
    end = max(max(instants), now)
    start = min(min(instants), end - MIN_SPAN)
    return start, end


def time_x(at: datetime, start: datetime, end: datetime) -> float:
    """The x of instant `at` on an axis from `start` (LEFT) to `end` (WIDTH - RIGHT)."""
    fraction = (at - start) / (end - start)
    return round(LEFT + fraction * (WIDTH - LEFT - RIGHT), 2)


def time_ticks(start: datetime, end: datetime, max_ticks: int = MAX_TICKS) -> list[Tick]:
    """Ticks at round UTC instants (whole hours, midnights, ...) between
    `start` and `end`: the smallest step that needs at most `max_ticks`."""
    span = end - start
    step = next((s for s in TICK_STEPS if span / s <= max_ticks), TICK_STEPS[-1])
    at = round_up(start, step)
    ticks = []
    while at <= end:
        ticks.append(Tick(x=time_x(at, start, end), label=tick_label(at, step)))
        at += step
    return ticks


def round_up(at: datetime, step: timedelta) -> datetime:
    """The first multiple of `step` since EPOCH at or after `at` (for a day
    or more: a UTC midnight)."""
    steps, rest = divmod(at - EPOCH, step)
    return EPOCH + (steps + (1 if rest else 0)) * step


def tick_label(at: datetime, step: timedelta) -> str:
    """The tick's UTC instant (the chart's heading says UTC) in the ISO order
    of every other time on the pages (core.instants), to the minute while
    the ticks fall within days, the date alone beyond."""
    at = at.astimezone(UTC)
    if step < DAY:
        return f"{at:%Y-%m-%d %H:%M}"
    return f"{at:%Y-%m-%d}"


# Failure heat-map

HEAT_LABEL = 170  # room for the row labels (job names)
HEAT_CELL = 24
HEAT_ROW = 20
HEAT_HEADER = 18  # room for the hour labels
# Failure share above which a cell takes the next, darker level.
HEAT_LEVELS = [0.0, 0.1, 0.25, 0.5]


@dataclass
class HeatCell:
    x: int
    start: datetime
    failed: int
    total: int
    level: str

    @property
    def share(self) -> float:
        return self.failed / self.total if self.total else 0.0


@dataclass
class HeatRow:
    y: int
    label: str
    job_name: str  # empty for the row of all jobs
    cells: list

    @property
    def failed(self) -> int:
        return sum(cell.failed for cell in self.cells)

    @property
    def total(self) -> int:
        return sum(cell.total for cell in self.cells)


@dataclass
class HeatMap:
    rows: list
    hours: list  # Tick per labelled hour
    span: int  # hours shown
    width: int
    height: int
    cell: int = HEAT_CELL
    row_height: int = HEAT_ROW
    left: int = HEAT_LABEL


def hour_buckets(now: datetime, hours: int) -> list[datetime]:
    """The start instants of the last `hours` clock hours, the current
    (unfinished) hour last."""
    current = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return [current - (hours - 1 - i) * HOUR for i in range(hours)]


def heat_level(failed: int, total: int) -> str:
    """ "none" without runs, else 0 (no failure) to 4 (more than half failed)."""
    if not total:
        return "none"
    if not failed:
        return "0"
    share = failed / total
    return str(sum(1 for threshold in HEAT_LEVELS if share > threshold))


def failure_heatmap(
    rows: Sequence[tuple[str, str, dict[int, tuple[int, int]]]], now: datetime, hours: int
) -> HeatMap:
    """`rows`: [(label, job_name, {bucket: (failed, total)})], bucket 0 the
    oldest of hour_buckets(now, hours). One row of cells each, one column per hour."""
    starts = hour_buckets(now, hours)
    drawn = []
    for r, (label, job_name, counts) in enumerate(rows):
        y = HEAT_HEADER + r * HEAT_ROW
        cells = [
            HeatCell(
                x=HEAT_LABEL + i * HEAT_CELL,
                start=start,
                failed=counts.get(i, (0, 0))[0],
                total=counts.get(i, (0, 0))[1],
                level=heat_level(*counts.get(i, (0, 0))),
            )
            for i, start in enumerate(starts)
        ]
        drawn.append(HeatRow(y=y, label=short(label), job_name=job_name, cells=cells))
    labelled = [
        Tick(x=HEAT_LABEL + i * HEAT_CELL + HEAT_CELL / 2, label=f"{start:%H}")
        for i, start in enumerate(starts)
        if i % 3 == 0 or i == hours - 1
    ]
    return HeatMap(
        rows=drawn,
        hours=labelled,
        span=hours,
        width=HEAT_LABEL + hours * HEAT_CELL,
        height=HEAT_HEADER + len(rows) * HEAT_ROW,
    )


def short(label: str, length: int = 24) -> str:
    return label if len(label) <= length else label[: length - 1] + "…"


# Capacity forecast: expected runs at once against the runners' slots


@dataclass
class CapacityChart:
    """One label set's forecast: demand and capacity as step lines over the
    buckets, and the buckets over capacity shaded."""

    labels: tuple
    demand_path: str
    capacity_path: str
    over: list  # (x, width) of each bucket over capacity
    ticks: list
    top_value: float
    peak: float
    capacity: int
    start: datetime
    end: datetime
    # Run by run (scheduler.forecast.contention): the most runs at once per
    # bucket as a step line, its highest, and the longest start delay.
    at_once_path: str = ""
    most_at_once: int = 0
    longest_delay: float | None = 0.0
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    baseline: int = HEIGHT - BOTTOM
    right: int = WIDTH - RIGHT

    @property
    def plot_height(self) -> int:
        return self.baseline - self.top

    @property
    def top_label(self) -> str:
        return f"{self.top_value:g}"

    @property
    def capacity_y(self) -> float:
        return self.y(self.capacity)

    def y(self, value: float) -> float:
        plot_height = HEIGHT - BOTTOM - TOP
        return round(HEIGHT - BOTTOM - plot_height * value / self.top_value, 2)


def capacity_chart(
    label_forecast: LabelForecast, starts: Sequence[datetime], bucket: timedelta
) -> CapacityChart:
    """A CapacityChart of a `scheduler.forecast.LabelForecast` whose buckets
    start at `starts`, each `bucket` long."""
    start, end = starts[0], starts[-1] + bucket
    peak = label_forecast.peak
    capacity = max(label_forecast.capacity, default=0)
    most = label_forecast.most_at_once
    # Whole runs on the y axis, with room above the highest line.
    top_value = max(math.ceil(max(peak, capacity, most) * 1.15), 1)
    chart = CapacityChart(
        labels=label_forecast.labels,
        demand_path="",
        capacity_path="",
        over=[],
        ticks=time_ticks(start, end),
        top_value=top_value,
        peak=peak,
        capacity=capacity,
        start=start,
        end=end,
        most_at_once=most,
        longest_delay=label_forecast.longest_delay,
    )
    edges = [time_x(at, start, end) for at in starts] + [time_x(end, start, end)]
    if label_forecast.peak_runs:
        chart.at_once_path = step_path(edges, [chart.y(v) for v in label_forecast.peak_runs])
    chart.demand_path = step_path(edges, [chart.y(v) for v in label_forecast.demand])
    chart.capacity_path = step_path(edges, [chart.y(v) for v in label_forecast.capacity])
    chart.over = [
        (edges[i], round(edges[i + 1] - edges[i], 2))
        for i, (load, slots) in enumerate(
            zip(label_forecast.demand, label_forecast.capacity, strict=True)
        )
        if load > slots + EPSILON
    ]
    return chart


def step_path(edges: Sequence[float], ys: Sequence[float]) -> str:
    """An SVG path holding each value from its bucket's left edge to its right."""
    if not ys:
        return ""
    parts = [f"M{edges[0]} {ys[0]}"]
    for i, y in enumerate(ys):
        if i and y != ys[i - 1]:
            parts.append(f"V{y}")
        parts.append(f"H{edges[i + 1]}")
    return "".join(parts)
