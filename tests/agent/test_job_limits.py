"""A run's limits held on real processes (docs/design.md §15): its output
within max_output (the head and the tail kept, or the run ended); its
memory and CPU time, of all its processes together in a cgroup where this
machine lets the agent make one, else by setrlimit and the process tree;
each run past its limit failed with an error naming it."""

import sys
import threading
import time

import pytest

from croniq_runner.cgroups import Cgroups
from croniq_runner.job import Job
from tests.agent.test_job import RecordingServer

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: /proc")

MIB = 1024 * 1024
PYTHON = sys.executable
# A process that takes `MiB` of memory, touched, and then waits.
HOLD = "import time; x = bytearray({mib} * 1024 * 1024); print('held', flush=True); time.sleep(60)"
# A process that burns CPU until it has used `seconds`, then waits.
BURN = (
    "import time\nt = time.process_time()\nwhile time.process_time() - t < {seconds}: pass\n"
    "print('burnt', flush=True)\ntime.sleep(60)"
)
CGROUPS = Cgroups.probe()


def python(code):
    return f'{PYTHON} -c "{code}"'


def run(command, tmp_path, cgroups=None, wait=30, **limits):
    """The finish report and the log of `command` run with `limits`, the
    agent's watchdog ticking by hand."""
    server, done = RecordingServer(), threading.Event()
    job = Job(
        {"id": 9, "lease": 4, "command": command, "job": "j", "attempt": 1, **limits},
        client=server,
        session="s1",
        work_dir=str(tmp_path),
        on_done=lambda job: done.set(),
        on_unauthorized=lambda error: None,
        giving_up=threading.Event(),
        cgroups=cgroups,
    )
    job.start()
    deadline = time.monotonic() + wait
    while not done.wait(0.05):
        assert time.monotonic() < deadline, "the run did not end"
        job.tick(time.monotonic(), kill_grace=1.0)
    [finish] = server.bodies("finish")
    return finish, "".join(body["data"] for body in server.bodies("logs"))


def failed(finish):
    return finish["exit_code"], finish.get("error")


# -- output ---------------------------------------------------------------------------


def test_output_past_max_output_keeps_its_head_and_tail(tmp_path):
    command = "seq 1 20000"
    finish, log = run(command, tmp_path, max_output=4096)
    assert finish["exit_code"] == 0
    assert len(log.encode()) <= 4096
    assert log.startswith("1\n2\n3\n") and log.endswith("19999\n20000\n")
    assert " bytes of output cut here (max_output 4 KiB)]\n" in log


def test_output_past_max_output_with_on_max_output_fail_ends_the_run(tmp_path):
    # Without the limit it would write for a minute.
    command = "i=0; while [ $i -lt 600 ]; do seq 1 1000; sleep 0.1; i=$((i+1)); done"
    finish, log = run(command, tmp_path, max_output=4096, on_max_output="fail")
    assert failed(finish) == (None, "output limit 4 KiB exceeded")
    assert len(log.encode()) <= 4096


# -- memory -------------------------------------------------------------------------------


def test_memory_past_max_memory_fails_the_run_under_setrlimit(tmp_path):
    command = python(HOLD.format(mib=200))
    finish, log = run(command, tmp_path, max_memory=64 * MIB)
    assert failed(finish) == (None, "memory limit 64 MiB exceeded")
    assert "MemoryError" in log


def test_memory_within_max_memory_runs(tmp_path):
    finish, log = run(python("x = bytearray(8 * 1024 * 1024); print(len(x))"), tmp_path,
                      max_memory=256 * MIB)  # fmt: skip
    assert (finish["exit_code"], log) == (0, f"{8 * MIB}\n")


needs_memory_cgroup = pytest.mark.skipif(
    CGROUPS.memory is None, reason="no cgroup this agent may limit memory in here"
)


@needs_memory_cgroup
def test_memory_past_max_memory_fails_the_run_in_its_cgroup(tmp_path):
    finish, _ = run(python(HOLD.format(mib=200)), tmp_path, CGROUPS, max_memory=64 * MIB)
    assert failed(finish) == (None, "memory limit 64 MiB exceeded")


@needs_memory_cgroup
def test_in_a_cgroup_the_memory_of_all_the_runs_processes_counts(tmp_path):
    # Each of the three fits the limit; together they do not. Under
    # setrlimit each would hold its memory for a minute.
    one = python(HOLD.format(mib=30))
    finish, _ = run(f"{one} & {one} & {one} & wait", tmp_path, CGROUPS, max_memory=64 * MIB)
    assert failed(finish) == (None, "memory limit 64 MiB exceeded")


# -- CPU ----------------------------------------------------------------------------------


def test_cpu_past_max_cpu_seconds_fails_the_run(tmp_path):
    finish, _ = run(python(BURN.format(seconds=30)), tmp_path, max_cpu_seconds=1)
    assert failed(finish) == (None, "CPU limit 1 s exceeded")


@pytest.mark.parametrize("cgroups", [None, CGROUPS], ids=["process tree", "cgroup"])
def test_the_cpu_time_of_all_the_runs_processes_counts(tmp_path, cgroups):
    if cgroups is not None and cgroups.cpu is None:
        pytest.skip("no cgroup this agent may count CPU in here")
    # Each burns less than the limit, then waits a minute; together they pass it.
    one = python(BURN.format(seconds=0.8))
    finish, _ = run(f"{one} & {one} & {one} & wait", tmp_path, cgroups, max_cpu_seconds=2)
    assert failed(finish) == (None, "CPU limit 2 s exceeded")


def test_a_run_within_its_limits_succeeds(tmp_path):
    finish, log = run("echo fine", tmp_path, CGROUPS, max_memory=64 * MIB, max_cpu_seconds=5)
    assert (finish["exit_code"], finish.get("error"), log) == (0, None, "fine\n")


def test_a_malformed_limit_fails_the_run_unstarted(tmp_path):
    finish, log = run(f"touch {tmp_path / 'ran'}", tmp_path, max_memory="64MiB")
    assert failed(finish) == (None, "could not start: max_memory: '64MiB' is not a number of bytes")
    assert not (tmp_path / "ran").exists()
