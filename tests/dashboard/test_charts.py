from datetime import timedelta
from types import SimpleNamespace

from dashboard.charts import HEIGHT, LEFT, WIDTH, duration_chart, format_seconds


def run(seconds):
    return SimpleNamespace(duration=timedelta(seconds=seconds), state="succeeded", pk=1)


def test_the_longest_run_fills_the_plot_and_the_others_scale_with_it():
    chart = duration_chart([run(10), run(40), run(20)])
    heights = [bar.height for bar in chart.bars]
    assert heights[1] == max(heights)
    assert heights[0] * 4 == heights[1]
    assert heights[2] * 2 == heights[1]
    assert chart.max_label == "40.0 s"


def test_bars_sit_on_the_baseline_left_to_right_inside_the_plot():
    chart = duration_chart([run(1)] * 30)
    xs = [bar.x for bar in chart.bars]
    assert xs == sorted(xs)
    assert xs[0] >= LEFT
    assert chart.bars[-1].x + chart.bars[-1].width <= WIDTH
    assert all(round(bar.y + bar.height, 2) == chart.baseline for bar in chart.bars)
    assert chart.baseline < HEIGHT


def test_instant_runs_still_get_a_visible_bar():
    chart = duration_chart([run(0), run(0)])
    assert all(bar.height >= 1 for bar in chart.bars)


def test_no_runs_means_no_chart():
    assert duration_chart([]) is None


def test_durations_read_in_the_unit_that_fits():
    assert format_seconds(0.25) == "250 ms"
    assert format_seconds(42) == "42.0 s"
    assert format_seconds(600) == "10.0 min"
    assert format_seconds(3 * 3600) == "3.0 h"
