import pytest

from croniq_runner.timing import Backoff


def delays(backoff, n):
    return [backoff.next_delay() for _ in range(n)]


def test_delays_double_from_base_up_to_the_cap():
    backoff = Backoff(base=0.5, cap=4.0, rand=lambda: 1.0)
    assert delays(backoff, 6) == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_jitter_keeps_each_delay_between_half_and_all_of_its_ceiling():
    low = Backoff(base=1.0, cap=30.0, rand=lambda: 0.0)
    assert delays(low, 4) == [0.5, 1.0, 2.0, 4.0]
    middle = Backoff(base=1.0, cap=30.0, rand=lambda: 0.5)
    assert delays(middle, 3) == [0.75, 1.5, 3.0]


def test_real_randomness_stays_inside_the_bounds():
    backoff = Backoff(base=0.5, cap=8.0)
    for ceiling in [0.5, 1, 2, 4, 8, 8, 8]:
        assert ceiling / 2 <= backoff.next_delay() <= ceiling


def test_reset_starts_over_after_a_success():
    backoff = Backoff(base=0.5, cap=30.0, rand=lambda: 1.0)
    delays(backoff, 5)
    backoff.reset()
    assert backoff.next_delay() == 0.5


def test_a_very_long_outage_neither_overflows_nor_exceeds_the_cap():
    backoff = Backoff(base=0.5, cap=30.0, rand=lambda: 1.0)
    assert delays(backoff, 2000)[-1] == pytest.approx(30.0)
