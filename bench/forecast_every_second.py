"""The forecast's pure core over an `@every 1s` job: 86,400 runs a day, of
which only the cap's worth are enumerated, so one forecast stays fast.
Prints one JSON line with the median and max of several runs in ms.
Target: 500 ms. tests/scheduler/test_forecast.py checks the demand and the
cap; the time it takes is measured here. No database.

    .venv/bin/python bench/forecast_every_second.py
"""

import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUNS = 7
TARGET_MS = 500
NOW = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.UTC)


def every_second_job():
    from scheduler.forecast import JobLoad
    from scheduler.jobs.cron import next_fire

    def fires(after):
        instant = next_fire("@every 1s", "UTC", None, after, "skip")
        while instant is not None:
            yield instant
            instant = next_fire("@every 1s", "UTC", None, instant, "skip")

    return JobLoad("poller", ("linux",), 2, fires, every=dt.timedelta(seconds=1), calendar=None)


def main():
    os.environ.setdefault("SECRET_KEY", "croniq-bench-key")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    import django

    django.setup()
    from scheduler.forecast import RunnerSlots, forecast_load

    runners = [RunnerSlots("linux-1", frozenset({"linux"}), 1)]
    timings = []
    for _ in range(RUNS):
        started = time.perf_counter()
        forecast_load(NOW, [every_second_job()], runners)
        timings.append((time.perf_counter() - started) * 1000)
    print(
        json.dumps(
            {
                "bench": "forecast_every_second",
                "median_ms": round(statistics.median(timings), 2),
                "max_ms": round(max(timings), 2),
                "target_ms": TARGET_MS,
                "met": max(timings) < TARGET_MS,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
