"""Work answered ahead of its instant: the agent starts the job's supervisor
at once, and the supervisor runs the command at the instant, never before;
an agent gone meanwhile means nothing runs."""

import os
import subprocess
import sys
import time

import pytest

from croniq_runner.agent import MAX_STARTS_IN, start_at
from croniq_runner.job import SUPERVISOR


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


@pytest.mark.parametrize("value", [None, "0.05", True, 0, -1.0, float("nan"), [0.1]])
def test_a_missing_or_malformed_starts_in_starts_at_once(value):
    assignment = {"id": 1} if value is None else {"id": 1, "starts_in": value}
    assert start_at(assignment) is None


def test_starts_in_counts_from_arrival_and_is_capped():
    before = time.monotonic()
    assert before + 0.05 <= start_at({"starts_in": 0.05}) <= time.monotonic() + 0.05
    assert start_at({"starts_in": 1e9}) <= time.monotonic() + MAX_STARTS_IN
