"""The capacity forecast: how many runs of each label set are expected to go
on at once over the next hours, against the slots of the runners that carry
that label set (issue 19, part 6).

`core` is pure (`forecast_load`: the jobs as `JobLoad`, the runners as
`RunnerSlots`, a `Forecast` back); `fires` gives a job its fire instants from
the loop's own next-fire math; `reading` is the database side (`job_loads`:
active jobs, calendars shared, expected durations from one query).
`contention` places runs one by one on a label set's slots (the peak at
once, each run's start delay: what an average per quarter hour hides).
`dispatch.capacity.forecast` adds the runners. The names callers use are
importable from here.
"""

from scheduler.forecast.contention import DueRun, Replay, replay
from scheduler.forecast.core import (
    BUCKET,
    DEFAULT_SECONDS,
    ENUMERATED_RUNS,
    EPSILON,
    EVERY_RUNS,
    HISTORY_RUNS,
    HOURS,
    Forecast,
    JobLoad,
    LabelForecast,
    RunnerSlots,
    Span,
    Wait,
    forecast_load,
)
from scheduler.forecast.fires import schedule_fires
from scheduler.forecast.reading import expected_seconds, job_loads, recorded_runs

__all__ = [
    "BUCKET",
    "DEFAULT_SECONDS",
    "ENUMERATED_RUNS",
    "EPSILON",
    "EVERY_RUNS",
    "HISTORY_RUNS",
    "HOURS",
    "Forecast",
    "JobLoad",
    "LabelForecast",
    "RunnerSlots",
    "DueRun",
    "Replay",
    "Span",
    "Wait",
    "expected_seconds",
    "forecast_load",
    "job_loads",
    "recorded_runs",
    "replay",
    "schedule_fires",
]
