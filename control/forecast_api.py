"""`GET /api/v1/forecast`: the capacity forecast (dispatch.capacity) as the
dashboard's Capacity page shows it: per job label set, the runs expected at
once in each quarter hour against the slots of the runners taking work, and
the spans over capacity. Read once a minute per web process.

The runners' slots are shared by every project, so the forecast is the
whole install's to every key; `skipped`, keyed by job, names to a key bound
to a project only its own jobs (control.reach)."""

from datetime import datetime
from typing import Annotated, Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Query, Router, Schema

from control import auth, reach, scopes
from control.models import ApiKey
from control.schemas import ERRORS
from dispatch import capacity
from scheduler.models import Job

router = Router(tags=["forecast"])

MAX_HOURS = 72


class ForecastQuery(Schema):
    hours: Annotated[int, Field(ge=1, le=MAX_HOURS)] = Field(
        capacity.HOURS, description="How far ahead, in hours."
    )


class LabelSetOut(Schema):
    labels: list[str]
    jobs: int
    peak: float
    demand: list[float] = Field(description="Runs expected at once, one value per bucket.")
    capacity: list[int] = Field(description="Slots of the runners carrying the labels, per bucket.")
    runs_at_once: list[int] = Field(
        description="The most runs going on at once in each bucket, run by run (waiting ones "
        "included), where `demand` is the bucket's average."
    )
    peak_at_once: int = Field(description="The most of `runs_at_once`.")
    start_delay: list[float | None] = Field(
        description="Seconds the latest-starting run due in each bucket waits for a slot, "
        "the label set's runs queued on its slots in the order they are due; "
        "null when no runner taking work carries the labels."
    )
    longest_start_delay: float | None = Field(description="The most of `start_delay`.")


class SpanOut(Schema):
    start: datetime
    end: datetime
    labels: list[str]
    peak: float
    slots_needed: int
    capacity: int


class WaitOut(Schema):
    start: datetime
    end: datetime
    labels: list[str]
    peak_at_once: int
    capacity: int
    start_delay: float = Field(description="Seconds the latest-starting run due then waits.")


class ForecastOut(Schema):
    start: datetime
    end: datetime
    bucket_seconds: int
    label_sets: list[LabelSetOut]
    over_capacity: list[SpanOut]
    waits: list[WaitOut] = Field(
        description="Quarter hours where runs due on a label set outnumber its free slots "
        "and start late, earliest first."
    )
    skipped: dict[str, str] = Field(
        description="Jobs left out (a schedule or calendar that cannot be read), and why."
    )


@router.get(
    "forecast",
    auth=auth.needs_all(scopes.JOBS_READ, scopes.RUNNERS_READ),
    response={200: ForecastOut, **ERRORS},
)
def read_forecast(request: HttpRequest, query: Query[ForecastQuery]) -> dict[str, Any]:
    """The capacity forecast from now over `hours` in quarter hours."""
    result = capacity.cached_forecast(timezone.now(), query.hours)
    return {
        "start": result.start,
        "end": result.end,
        "bucket_seconds": int(result.bucket.total_seconds()),
        "label_sets": [
            {
                "labels": list(label_set.labels),
                "jobs": label_set.jobs,
                "peak": round(label_set.peak, 3),
                "demand": [round(value, 3) for value in label_set.demand],
                "capacity": label_set.capacity,
                "runs_at_once": label_set.peak_runs,
                "peak_at_once": label_set.most_at_once,
                "start_delay": [seconds(delay) for delay in label_set.delay],
                "longest_start_delay": seconds(label_set.longest_delay),
            }
            for label_set in result.label_sets
        ],
        "over_capacity": [
            {
                "start": span.start,
                "end": span.end,
                "labels": list(span.labels),
                "peak": round(span.peak, 3),
                "slots_needed": span.slots_needed,
                "capacity": span.capacity,
            }
            for span in result.spans
        ],
        "waits": [
            {
                "start": result.start_of(wait.bucket),
                "end": result.start_of(wait.bucket + 1),
                "labels": list(wait.labels),
                "peak_at_once": wait.peak,
                "capacity": wait.capacity,
                "start_delay": seconds(wait.delay),
            }
            for wait in result.waits
        ],
        "skipped": skipped(request.auth, result.skipped),
    }


def skipped(key: ApiKey, jobs: dict[str, str]) -> dict[str, str]:
    """{job: why} of the jobs the forecast left out that `key` reaches."""
    if reach.bound(key) is None or not jobs:
        return jobs
    rows = reach.narrowed(key, Job.objects.filter(name__in=list(jobs)))
    seen = set(rows.values_list("name", flat=True))
    return {name: why for name, why in jobs.items() if name in seen}


def seconds(delay: float | None) -> float | None:
    return None if delay is None else round(delay, 3)
