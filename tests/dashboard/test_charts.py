from datetime import UTC, datetime, timedelta

import pytest

from dashboard.charts import (
    HEAT_CELL,
    HEAT_LABEL,
    HEIGHT,
    LEFT,
    RIGHT,
    TOP,
    WIDTH,
    DurationRun,
    capacity_chart,
    duration_chart,
    failure_heatmap,
    format_seconds,
    heat_level,
    hour_buckets,
    time_ticks,
)
from scheduler.forecast import LabelForecast

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PLOT_WIDTH = WIDTH - LEFT - RIGHT


def run(started_at, seconds=10, state="succeeded", pk=1):
    return DurationRun(pk, state, started_at, seconds, state in {"failed", "timed_out", "lost"})


def test_a_run_sits_at_its_start_time_on_an_axis_from_the_oldest_run_to_now():
    oldest = run(NOW - timedelta(hours=10))
    middle = run(NOW - timedelta(hours=5))
    recent = run(NOW - timedelta(hours=1))

    chart = duration_chart([oldest, middle, recent], NOW)

    assert [point.x for point in chart.points] == [
        LEFT,
        LEFT + PLOT_WIDTH / 2,
        LEFT + PLOT_WIDTH * 0.9,
    ]
    assert (chart.start, chart.end) == (oldest.started_at, NOW)


def test_runs_bunched_in_time_stay_bunched_on_the_axis():
    # Runs at 0 h, 1 h, 2 h and 10 h ago: not four evenly spaced slots.
    runs = [run(NOW - timedelta(hours=h)) for h in (10, 2, 1, 0)]
    xs = [point.x for point in duration_chart(runs, NOW).points]
    assert xs[2] - xs[1] == pytest.approx(xs[3] - xs[2])
    assert xs[1] - xs[0] == pytest.approx(8 * (xs[2] - xs[1]))


def test_a_lone_run_sits_in_an_hour_wide_axis_ending_now():
    chart = duration_chart([run(NOW - timedelta(minutes=15))], NOW)
    assert chart.start == NOW - timedelta(hours=1)
    assert chart.points[0].x == LEFT + PLOT_WIDTH * 0.75


def test_the_longest_run_reaches_the_top_and_the_others_scale_with_it():
    runs = [run(NOW - timedelta(minutes=m), seconds=s) for m, s in ((3, 10), (2, 40), (1, 20))]
    chart = duration_chart(runs, NOW)
    baseline = HEIGHT - chart.baseline
    heights = [chart.baseline - point.y for point in chart.points]
    assert chart.points[1].y == TOP
    assert heights[0] * 4 == heights[1] == heights[2] * 2
    assert chart.max_label == "40.0 s"
    assert baseline > 0


def test_failures_are_marked_and_counted():
    runs = [
        run(NOW - timedelta(minutes=3), state="succeeded"),
        run(NOW - timedelta(minutes=2), state="failed"),
        run(NOW - timedelta(minutes=1), state="timed_out"),
    ]
    chart = duration_chart(runs, NOW)
    assert [point.run.failed for point in chart.points] == [False, True, True]
    assert chart.failures == 2


def test_no_runs_means_no_chart():
    assert duration_chart([], NOW) is None


def test_ticks_fall_on_round_utc_hours_within_the_span():
    ticks = time_ticks(NOW - timedelta(hours=5, minutes=30), NOW)
    assert [tick.label for tick in ticks] == [
        "2026-11-30 07:00",
        "2026-11-30 08:00",
        "2026-11-30 09:00",
        "2026-11-30 10:00",
        "2026-11-30 11:00",
        "2026-11-30 12:00",
    ]
    assert ticks[-1].x == WIDTH - RIGHT


def test_ticks_of_a_month_are_dates_at_utc_midnight():
    start = NOW - timedelta(days=30)
    ticks = time_ticks(start, NOW)
    assert len(ticks) <= 6
    assert [tick.label for tick in ticks] == [
        "2026-11-02",
        "2026-11-09",
        "2026-11-16",
        "2026-11-23",
        "2026-11-30",
    ]
    # Weekly, on Mondays: the tick of Monday Nov 2, 00:00 UTC sits where that instant falls.
    at = datetime(2026, 11, 2, tzinfo=UTC)
    assert ticks[0].x == pytest.approx(LEFT + PLOT_WIDTH * ((at - start) / (NOW - start)), abs=0.01)


def test_durations_read_in_the_unit_that_fits():
    assert format_seconds(0.25) == "250 ms"
    assert format_seconds(42) == "42.0 s"
    assert format_seconds(600) == "10.0 min"
    assert format_seconds(3 * 3600) == "3.0 h"


# Heat-map


def test_hour_buckets_are_the_last_clock_hours_the_current_one_last():
    buckets = hour_buckets(NOW + timedelta(minutes=25), 24)
    assert len(buckets) == 24
    assert buckets[-1] == NOW
    assert buckets[0] == NOW - timedelta(hours=23)


@pytest.mark.parametrize(
    ("failed", "total", "level"),
    [
        (0, 0, "none"),
        (0, 12, "0"),
        (1, 100, "1"),
        (1, 10, "1"),
        (2, 10, "2"),
        (1, 4, "2"),
        (3, 10, "3"),
        (1, 2, "3"),
        (6, 10, "4"),
        (5, 5, "4"),
    ],
)
def test_a_cell_darkens_with_the_share_of_failed_runs(failed, total, level):
    assert heat_level(failed, total) == level


def test_heatmap_places_each_bucket_in_its_hour_column_and_row():
    rows = [
        ("All jobs", "", {0: (1, 4), 23: (0, 2)}),
        ("nightly", "nightly", {5: (2, 2)}),
    ]
    heatmap = failure_heatmap(rows, NOW, 24)

    every, nightly = heatmap.rows
    assert len(every.cells) == len(nightly.cells) == 24
    assert every.cells[0].start == NOW - timedelta(hours=23)
    assert (every.cells[0].failed, every.cells[0].total, every.cells[0].level) == (1, 4, "2")
    assert every.cells[23].x == HEAT_LABEL + 23 * HEAT_CELL
    assert every.cells[23].level == "0"
    assert every.cells[5].level == "none"
    assert (nightly.cells[5].failed, nightly.cells[5].level) == (2, "4")
    assert nightly.y > every.y
    assert (every.failed, every.total) == (1, 6)
    assert heatmap.width == HEAT_LABEL + 24 * HEAT_CELL
    assert heatmap.hours[-1].label == "12"


def test_long_job_names_are_shortened_on_the_heatmap():
    heatmap = failure_heatmap([("x" * 40, "x" * 40, {})], NOW, 24)
    assert heatmap.rows[0].label == "x" * 23 + "…"
    assert heatmap.rows[0].job_name == "x" * 40


def test_the_capacity_chart_draws_demand_and_slots_as_steps_and_shades_the_shortage():
    quarter = timedelta(minutes=15)
    starts = [NOW + i * quarter for i in range(4)]
    forecast = LabelForecast(("linux",), jobs=3, demand=[0.0, 2.5, 1.0, 0.5], capacity=[1] * 4)
    chart = capacity_chart(forecast, starts, quarter)
    step = PLOT_WIDTH / 4
    edges = [round(LEFT + i * step, 2) for i in range(5)]
    assert chart.top_value == 3  # 2.5 and room above, in whole runs
    baseline = HEIGHT - 24
    assert chart.y(0) == baseline and chart.y(3) == TOP
    assert chart.demand_path.startswith(f"M{edges[0]} {chart.y(0)}H{edges[1]}V{chart.y(2.5)}")
    assert chart.demand_path.endswith(f"V{chart.y(0.5)}H{edges[4]}")
    assert (
        chart.capacity_path
        == f"M{edges[0]} {chart.y(1)}H{edges[1]}H{edges[2]}H{edges[3]}H{edges[4]}"
    )
    assert chart.over == [(edges[1], round(edges[2] - edges[1], 2))]  # 1.0 of 1 is no shortage
