"""Maintenance rules as pure functions of fixed instants: what is held
back, which window an occurrence falls in, the banner, a bad window."""

import datetime as dt

import pytest

from scheduler.runs.maintenance import (
    EVERYTHING,
    SWITCH,
    Maintenance,
    Window,
    banner,
    check_window,
    is_held,
)

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
ALL_JOBS = Window(T0, T0 + HOUR, id=1)
GPU_ONLY = Window(T0, T0 + HOUR, labels=frozenset({"gpu"}), id=2)


def test_a_window_is_active_from_its_start_up_to_but_not_at_its_end():
    assert not ALL_JOBS.active(T0 - dt.timedelta(microseconds=1))
    assert ALL_JOBS.active(T0)
    assert ALL_JOBS.active(T0 + HOUR - dt.timedelta(microseconds=1))
    assert not ALL_JOBS.active(T0 + HOUR)


def test_nothing_is_held_without_a_switch_or_an_active_window():
    assert Maintenance().held(T0) is None
    assert Maintenance(windows=(ALL_JOBS,)).held(T0 - HOUR) is None
    assert Maintenance(windows=(ALL_JOBS,)).held(T0 + HOUR) is None


def test_the_switch_and_an_unlabelled_window_hold_everything():
    assert Maintenance(switch_on=True).held(T0) == EVERYTHING
    assert Maintenance(windows=(ALL_JOBS, GPU_ONLY)).held(T0) == EVERYTHING


def test_a_labelled_window_holds_only_jobs_carrying_one_of_its_labels():
    held = Maintenance(windows=(GPU_ONLY,)).held(T0)
    assert held == {"gpu"}
    assert is_held(held, ["gpu", "linux"])
    assert not is_held(held, ["linux"])
    assert not is_held(held, [])


def test_a_claim_made_ahead_is_held_by_a_window_starting_before_its_instant():
    soon = Maintenance(windows=(ALL_JOBS,))
    assert soon.held(T0 - dt.timedelta(seconds=1)) is None
    assert soon.held(T0 - dt.timedelta(seconds=1), until=T0) == EVERYTHING


def test_an_occurrence_falls_in_the_covering_window_that_ends_last():
    longer = Window(T0, T0 + 2 * HOUR, labels=frozenset({"gpu"}), id=3)
    current = Maintenance(windows=(ALL_JOBS, longer))
    assert current.covering(["gpu"], T0 + dt.timedelta(minutes=5)) == longer
    assert current.covering(["linux"], T0 + dt.timedelta(minutes=5)) == ALL_JOBS
    assert current.covering(["linux"], T0 + HOUR) is None
    assert Maintenance(switch_on=True).covering([], T0) == SWITCH


def test_the_banner_says_what_is_held_and_until_when():
    assert banner(Maintenance(), T0) is None
    assert banner(Maintenance(switch_on=True), T0, reason="db upgrade") == (
        "Maintenance mode is on: runners claim no new work. db upgrade"
    )
    labelled = Maintenance(windows=(Window(T0, T0 + HOUR, frozenset({"gpu"}), 2, "drivers"),))
    assert banner(labelled, T0) == (
        "Maintenance window until 2026-06-01 13:00:00 UTC: no new work is claimed "
        "for jobs labelled gpu. drivers"
    )
    assert banner(labelled, T0 + HOUR) is None


@pytest.mark.parametrize("end", [T0, T0 - HOUR])
def test_a_window_that_does_not_end_after_it_starts_is_refused_naming_end(end):
    with pytest.raises(ValueError, match=r"^end: .* is not after start"):
        check_window(T0, end)
