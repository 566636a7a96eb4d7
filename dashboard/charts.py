"""Geometry for the run-duration chart, drawn as inline SVG by the template."""

from dataclasses import dataclass

WIDTH = 720
HEIGHT = 160
TOP = 10
BOTTOM = 20  # room for the axis labels
LEFT = 48


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    seconds: float
    run: object


@dataclass
class DurationChart:
    bars: list
    max_seconds: float
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    baseline: int = HEIGHT - BOTTOM

    @property
    def max_label(self):
        return format_seconds(self.max_seconds)


def format_seconds(seconds):
    if seconds == 0:
        return "0 s"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def duration_chart(runs):
    """One bar per run (oldest left), height proportional to its duration."""
    durations = [run.duration.total_seconds() for run in runs]
    if not durations:
        return None
    top = max(max(durations), 0.001)
    plot_height = HEIGHT - BOTTOM - TOP
    slot = (WIDTH - LEFT) / len(durations)
    width = max(slot * 0.8, 1)
    bars = []
    for i, (run, seconds) in enumerate(zip(runs, durations, strict=True)):
        height = max(plot_height * seconds / top, 1)
        bars.append(
            Bar(
                x=round(LEFT + i * slot + (slot - width) / 2, 2),
                y=round(HEIGHT - BOTTOM - height, 2),
                width=round(width, 2),
                height=round(height, 2),
                seconds=seconds,
                run=run,
            )
        )
    return DurationChart(bars=bars, max_seconds=top)
