"""Work answered ahead of its instant: the agent starts the job's supervisor
at once, and the supervisor runs the command at the instant, never before;
an agent gone meanwhile means nothing runs."""

import os
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest

from croniq_runner.agent import MAX_STARTS_IN, MAX_TRANSIT, Arrival, start_at
from croniq_runner.job import SUPERVISOR
from croniq_runner.supervisor import LAST_STRETCH, STEP, next_turn

# An answer arrived when time.monotonic() read 100 and the wall clock 1000.
ARRIVED = Arrival(100.0, 1_000.0)


def iso(seconds):
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def supervise(start, command, lifeline):
    """The supervisor as the agent starts it, with --start-at `start`."""
    return subprocess.Popen(
        [sys.executable, "-I", "-S", SUPERVISOR, str(lifeline), "1",
         "--start-at", f"{start:.6f}", "--", "sh", "-c", command],
        stdout=subprocess.PIPE, text=True, pass_fds=(lifeline,), start_new_session=True,
    )  # fmt: skip


def test_the_command_starts_at_the_instant_not_before():
    read_end, write_end = os.pipe()
    start = time.monotonic() + 0.4
    wall_start = time.time() + 0.4
    process = supervise(start, "date +%s.%N", read_end)
    os.close(read_end)
    out, _ = process.communicate(timeout=10)
    os.close(write_end)
    assert process.returncode == 0
    began = float(out)
    assert began >= wall_start - 0.002  # the clocks' reads differ by microseconds
    assert began < wall_start + 0.3


def test_an_instant_already_past_starts_at_once():
    read_end, write_end = os.pipe()
    process = supervise(time.monotonic() - 5, "echo ran", read_end)
    os.close(read_end)
    out, _ = process.communicate(timeout=10)
    os.close(write_end)
    assert out.strip() == "ran"


def test_an_agent_gone_before_the_instant_means_the_command_never_runs(tmp_path):
    marker = tmp_path / "ran"
    read_end, write_end = os.pipe()
    process = supervise(time.monotonic() + 1.0, f"touch {marker}", read_end)
    os.close(read_end)
    time.sleep(0.2)
    os.close(write_end)  # the agent dies: its end of the pipe closes
    process.communicate(timeout=10)
    assert process.returncode == 1
    time.sleep(1.2)  # past the instant
    assert not marker.exists()


def test_the_supervisor_sleeps_the_last_stretch_before_the_instant_in_short_turns():
    turns, left = [], 0.15
    while left > 1e-9:
        turns.append(next_turn(left))
        left -= turns[-1]
    assert turns[0] == pytest.approx(0.15 - LAST_STRETCH)
    assert turns[1:] == pytest.approx([STEP] * round(LAST_STRETCH / STEP))


@pytest.mark.parametrize("left", [STEP / 2, LAST_STRETCH + STEP / 2])
def test_a_wait_shorter_than_the_last_stretch_is_slept_in_short_turns_only(left):
    assert next_turn(left) == min(left, STEP)


@pytest.mark.parametrize("value", [None, "0.05", True, 0, -1.0, float("nan"), [0.1]])
def test_a_missing_or_malformed_starts_in_starts_at_once(value):
    assignment = {"id": 1} if value is None else {"id": 1, "starts_in": value}
    assert start_at(assignment, ARRIVED) is None


def test_starts_in_counts_from_arrival_and_is_capped():
    assert start_at({"starts_in": 0.05}, ARRIVED) == 100.05
    assert start_at({"starts_in": 1e9}, ARRIVED) == 100.0 + MAX_STARTS_IN


def test_a_starts_at_this_clock_agrees_with_starts_without_the_answers_way():
    # starts_in was 0.15 s when the server wrote the answer, which took 3 ms
    # to arrive: by this machine's clock the instant is 0.147 s away.
    assignment = {"starts_in": 0.15, "starts_at": iso(1_000.147)}
    assert start_at(assignment, ARRIVED) == pytest.approx(100.147, abs=1e-6)


@pytest.mark.parametrize(
    "offset",
    [
        MAX_TRANSIT + 0.01,  # this clock runs ahead of the server's: never that early
        -0.01,  # behind it: never later than starts_in says
    ],
)
def test_a_starts_at_the_clocks_disagree_on_leaves_starts_in_to_decide(offset):
    assignment = {"starts_in": 0.15, "starts_at": iso(1_000.15 - offset)}
    assert start_at(assignment, ARRIVED) == 100.15


@pytest.mark.parametrize("value", ["soon", "2026-01-01T00:00:00", 1_000.1, None])
def test_a_malformed_starts_at_is_ignored(value):
    assert start_at({"starts_in": 0.15, "starts_at": value}, ARRIVED) == 100.15


def test_a_starts_at_with_no_starts_in_starts_at_once():
    # As a server that answered at the instant: nothing to wait for.
    assert start_at({"starts_in": 0, "starts_at": iso(1_000.01)}, ARRIVED) is None
