"""Speed of the calendar-gated next-fire math. Prints one JSON object per measurement.

Run: .venv/bin/python bench/next_fire.py   (no database, no Django setup)
"""

import json
import os
import statistics
import sys
import time
from datetime import UTC, date, datetime, timedelta
from datetime import time as dt_time
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calendars.periods import Period  # noqa: E402
from calendars.rules import CalendarRules  # noqa: E402
from scheduler.jobs.cron import (  # noqa: E402
    never_fires_reason,
    next_fire,
    next_fire_of,
    next_fires,
    parse_schedule,
)
from scheduler.jobs.schedules.union import Source, Timing  # noqa: E402

START = datetime(2026, 12, 20, 12, 0, tzinfo=UTC)
REPEATS = 201


def emit(name, value, unit, target, **extra):
    line = {"bench": name, "value": round(value, 4), "unit": unit, "target": target}
    if target is not None:
        line["met"] = value <= target
    line.update(extra)
    line["load_average"] = round(os.getloadavg()[0], 2)  # wall times stretch on a busy box
    print(json.dumps(line), flush=True)


def median_ms(fn, repeats=REPEATS):
    """(median wall ms, median CPU ms, result) over `repeats` calls."""
    wall, cpu = [], []
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    return statistics.median(wall), round(statistics.median(cpu), 4), fn()


def naive_next_fire(schedule, calendar, after):
    """Discard-and-retry, for comparison: every blocked candidate is one more round."""
    candidate = after
    rounds = 0
    while True:
        candidate = next_fire(schedule, "Europe/Berlin", None, candidate)
        rounds += 1
        if calendar.is_allowed(candidate):
            return candidate, rounds


def bench_blackout():
    freeze = CalendarRules(
        timezone="Europe/Berlin",
        exclude=(Period(date(2026, 12, 21), date(2027, 1, 10), "Christmas freeze"),),
        name="freeze",
    )
    schedule = parse_schedule("* * * * *")
    after = datetime(2026, 12, 20, 23, 0, tzinfo=UTC)  # local midnight, as the freeze starts
    fast, cpu, found = median_ms(lambda: next_fire(schedule, "Europe/Berlin", freeze, after))
    emit(
        "every_minute_across_21_day_blackout",
        fast,
        "ms (median)",
        1.0,
        cpu_ms=cpu,
        result=found.isoformat(),
    )
    started = time.perf_counter()
    slow, rounds = naive_next_fire(schedule, freeze, after)
    naive = (time.perf_counter() - started) * 1000
    assert slow == found, (slow, found)
    emit(
        "every_minute_across_21_day_blackout_naive_discard_and_retry",
        naive,
        "ms (one run)",
        None,
        candidates_discarded=rounds - 1,
        speedup=round(naive / fast, 1),
    )


def bench_de_by_workdays():
    workdays = CalendarRules(
        timezone="Europe/Berlin",
        weekdays=("mon", "tue", "wed", "thu", "fri"),
        holiday_country="DE",
        holiday_subdivision="BY",
        name="de-by-workdays",
    )
    next_fires("0 9 * * 1-5", "Europe/Berlin", workdays, START, 1)  # warm the holiday cache
    started, started_cpu = time.perf_counter(), time.process_time()
    fires = next_fires("0 9 * * 1-5", "Europe/Berlin", workdays, START, 2500)
    total = (time.perf_counter() - started) * 1000
    emit(
        "2500_fires_weekday_9am_de_by_holidays",
        total,
        "ms (total)",
        250.0,
        cpu_ms=round((time.process_time() - started_cpu) * 1000, 4),
        first=fires[0].isoformat(),
        last=fires[-1].isoformat(),
    )


def bench_never_fires():
    workdays = CalendarRules(
        timezone="Europe/Berlin", weekdays=("mon", "tue", "wed", "thu", "fri"), name="workdays"
    )
    never_fires_reason("0 9 * * 6", "Europe/Berlin", workdays, START)  # warm caches
    took, cpu, reason = median_ms(
        lambda: never_fires_reason("0 9 * * 6", "Europe/Berlin", workdays, START), repeats=21
    )
    emit("never_fires_detection_5_years", took, "ms (median)", 50.0, cpu_ms=cpu, reason=reason)
    # Harder: the schedule misses the window every single day, so the search
    # crosses 1,826 blocked stretches before giving up.
    evenings = CalendarRules(
        timezone="Europe/Berlin",
        window_start=dt_time(18),
        window_end=dt_time(22),
        holiday_country="DE",
        holiday_subdivision="BY",
        name="evenings",
    )
    took, cpu, reason = median_ms(
        lambda: never_fires_reason("0 9 * * *", "Europe/Berlin", evenings, START), repeats=11
    )
    emit(
        "never_fires_detection_5_years_daily_misses",
        took,
        "ms (median)",
        50.0,
        cpu_ms=cpu,
        reason=reason,
    )


def bench_business_day_months():
    """120 consecutive months of `@business_day -1 18:00` (each fire the next
    `after`), on de-by-workdays alone and with the docs/design.md calendar's daily
    window and Christmas freeze (those make each day's check an interval search)."""
    plain = CalendarRules(
        timezone="Europe/Berlin",
        weekdays=("mon", "tue", "wed", "thu", "fri"),
        holiday_country="DE",
        holiday_subdivision="BY",
        name="de-by-workdays",
    )
    windowed = CalendarRules(
        timezone="Europe/Berlin",
        weekdays=("mon", "tue", "wed", "thu", "fri"),
        holiday_country="DE",
        holiday_subdivision="BY",
        window_start=dt_time(6),
        window_end=dt_time(22),
        exclude=(Period(date(2026, 12, 24), date(2027, 1, 6), "Christmas freeze"),),
        name="de-by-workdays-window",
    )
    schedule = "@business_day -1 18:00"
    for name, calendar in (("holidays", plain), ("holidays_window_freeze", windowed)):
        started = time.perf_counter()
        fires = next_fires(schedule, "Europe/Berlin", calendar, START, 120)
        first_run = (time.perf_counter() - started) * 1000  # caches as the benches above left them
        took, cpu, fires = median_ms(
            lambda calendar=calendar: next_fires(schedule, "Europe/Berlin", calendar, START, 120),
            repeats=21,
        )
        assert len(fires) == 120, len(fires)
        emit(
            f"business_day_last_120_months_{name}",
            took,
            "ms (median)",
            50.0,
            cpu_ms=cpu,
            first_run_ms=round(first_run, 2),
            first=fires[0].isoformat(),
            last=fires[-1].isoformat(),
        )


# The Quartz day forms and Jenkins' H, against plain cron on the same clock.
FORMS = [
    ("plain", "0 9 * * *"),
    ("last_day", "0 9 L * *"),
    ("last_weekday", "0 9 LW * *"),
    ("nearest_weekday", "0 9 15W * *"),
    ("last_friday", "0 9 * * 5L"),
    ("second_monday", "0 9 * * 1#2"),
    ("hashed_minute", "H 2 * * *"),
    ("hashed_range", "H(0-29) H(1-5) * * *"),
    ("hashed_step", "H/15 * * * *"),
]


def bench_forms():
    """Median next_fire of each form from instants spread over a year (so the
    month-end forms walk anything from a day to a month), as the loop asks:
    schedule text and the job's name."""
    for label, text in FORMS:
        afters = iter([START + timedelta(hours=37 * i) for i in range(REPEATS + 1)] * 2)
        took, cpu, found = median_ms(
            lambda text=text, afters=afters: next_fire(
                text, "Europe/Berlin", None, next(afters), key="nightly-report"
            )
        )
        emit(f"next_fire_{label}", took, "ms (median)", 1.0, cpu_ms=cpu, schedule=text)
    # A new key is a parse (the cache holds each job's): 300 jobs' H once each.
    started = time.perf_counter()
    for n in range(300):
        parse_schedule("H 2 * * *", key=f"bench-job-{n}")
    emit("parse_h_300_job_names", (time.perf_counter() - started) * 1000, "ms (total)", None)


# A job of five schedules on three clocks (docs/design.md §14).
FIVE_SCHEDULES = [
    ("30 7 * * 1-5", "Europe/Berlin"),
    ("0 12 * * *", "Europe/Berlin"),
    ("15 9 * * 1", "America/New_York"),
    ("H 18 * * 1-5", "Asia/Tokyo"),
    ("0 8 1 * *", "UTC"),
]


def bench_five_schedules_and_a_calendar():
    """Median next fire of a job with five schedules and the design's office
    calendar (weekdays, Bavarian holidays, a daily window, a Christmas
    freeze), as `Job.next_fire_after` asks it (`next_fire_of`: each schedule
    gated, the union taken), from instants spread over a year."""
    office = CalendarRules(
        timezone="Europe/Berlin",
        weekdays=("mon", "tue", "wed", "thu", "fri"),
        holiday_country="DE",
        holiday_subdivision="BY",
        window_start=dt_time(6),
        window_end=dt_time(22),
        exclude=(Period(date(2026, 12, 24), date(2027, 1, 6), "Christmas freeze"),),
        name="office",
    )
    key = "five-schedules"
    timing = Timing(
        tuple(
            Source(parse_schedule(text, key=key), ZoneInfo(zone)) for text, zone in FIVE_SCHEDULES
        )
    )
    next_fire_of(timing, office, START, key=key)  # warm the holiday cache
    afters = iter([START + timedelta(hours=37 * i) for i in range(REPEATS + 1)] * 2)
    took, cpu, found = median_ms(lambda: next_fire_of(timing, office, next(afters), key=key))
    emit(
        "next_fire_5_schedules_with_calendar",
        took,
        "ms (median)",
        1.0,
        cpu_ms=cpu,
        schedules=len(FIVE_SCHEDULES),
    )


def bench_warm_up_cost():
    # Building a holiday year and a zone's transitions happens once per process.
    started = time.perf_counter()
    CalendarRules(holiday_country="GB", timezone="Australia/Sydney").next_allowed(
        START + timedelta(days=3650)
    )
    emit("first_use_cold_caches", (time.perf_counter() - started) * 1000, "ms", None)


if __name__ == "__main__":
    bench_blackout()
    bench_de_by_workdays()
    bench_never_fires()
    bench_business_day_months()

    bench_forms()
    bench_five_schedules_and_a_calendar()
    bench_warm_up_cost()
