"""The capacity forecast read from the database: the jobs' expected runs
(`scheduler.forecast`) against the slots of the runners taking work now."""

from datetime import datetime, timedelta

from django.core.cache import cache

from runners.models import Runner
from scheduler.forecast import BUCKET, HOURS, Forecast, RunnerSlots, forecast_load, job_loads

# The forecast is read at most once a minute per web process (as the
# dashboard's heat-map): it moves little in a minute, and 2,000 jobs cost a
# few hundred milliseconds.
CACHE_SECONDS = 60


def runner_slots() -> list[RunnerSlots]:
    """[RunnerSlots] of every registered runner: online and not drained ones
    take work (`dispatch.coverage.Coverage.taking_work` counts the same)."""
    rows = Runner.objects.only("name", "labels", "capacity", "state", "drained")
    return [
        RunnerSlots(
            name=runner.name,
            labels=frozenset(runner.labels or ()),
            capacity=runner.capacity,
            takes_work=runner.state == Runner.ONLINE and not runner.drained,
        )
        for runner in rows
    ]


def forecast(now: datetime, hours: int = HOURS) -> Forecast:
    """The `scheduler.forecast.Forecast` of the active jobs from `now` over `hours`."""
    until = now + timedelta(hours=hours) + BUCKET  # the last bucket's end, at the latest
    return forecast_load(now, job_loads(until), runner_slots(), hours=hours)


def cached_forecast(now: datetime, hours: int = HOURS) -> Forecast:
    """`forecast(now, hours)`, reused for the rest of `now`'s minute."""
    key = f"croniq:forecast:{hours}:{now:%Y-%m-%dT%H:%M}"
    return cache.get_or_set(key, lambda: forecast(now, hours), CACHE_SECONDS)
