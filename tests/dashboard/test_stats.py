import pytest

from dashboard.stats import WindowStats, percentile, percentiles, success_rate


def test_percentiles_interpolate_between_the_nearest_values():
    values = list(range(1, 101))  # 1..100 seconds, shuffled order does not matter
    values.reverse()
    assert percentiles(values) == [pytest.approx(50.5), pytest.approx(95.05), pytest.approx(99.01)]


def test_percentile_of_one_value_is_that_value_and_of_none_is_none():
    assert percentile([7.0], 0.99) == 7.0
    assert percentiles([]) == [None, None, None]


def test_percentile_ends_are_the_minimum_and_the_maximum():
    assert percentile([1.0, 2.0, 10.0], 0.0) == 1.0
    assert percentile([1.0, 2.0, 10.0], 1.0) == 10.0
    assert percentile([1.0, 2.0, 10.0], 0.75) == 6.0


def test_success_rate_is_the_share_of_settled_runs_that_succeeded():
    assert success_rate(3, 4) == 0.75
    assert success_rate(0, 0) is None
    window = WindowStats(days=7, settled=10, succeeded=9)
    assert window.success_rate == 0.9
    assert window.failed == 1
