"""A run's limits on the agent (limits.py, docs/design.md §15): read from its
assignment, refused naming the field when malformed; handed to the
supervisor as cgroups or rlimits; and the error a run past one ends with."""

import contextlib
import os
import resource
import signal
import subprocess
import sys

import pytest

from croniq_runner.cgroups import Place, RunCgroup
from croniq_runner.job import SUPERVISOR
from croniq_runner.limits import DEFAULT_MAX_OUTPUT, Held, Limits, LimitsError, tree_cpu_seconds

MIB = 1024 * 1024


def test_an_assignment_without_limits_keeps_one_mebibyte_of_log_and_nothing_else():
    assert Limits.of({}) == Limits(DEFAULT_MAX_OUTPUT, False, None, None)
    assert DEFAULT_MAX_OUTPUT == MIB
    assert not Limits.of({}).of_processes


def test_an_assignments_limits_are_read_as_sent():
    limits = Limits.of(
        {"max_output": 4096, "on_max_output": "fail", "max_memory": 64 * MIB, "max_cpu_seconds": 2}
    )
    assert limits == Limits(4096, True, 64 * MIB, 2)
    assert limits.of_processes
    assert limits.output_error() == "output limit 4 KiB exceeded"
    assert limits.memory_error() == "memory limit 64 MiB exceeded"
    assert limits.cpu_error() == "CPU limit 2 s exceeded"


@pytest.mark.parametrize(
    ("assignment", "error"),
    [
        ({"max_memory": "64MiB"}, "max_memory: '64MiB' is not a number of bytes"),
        ({"max_memory": 0}, "max_memory: 0 is not a number of bytes"),
        ({"max_output": True}, "max_output: True is not a number of bytes"),
        ({"max_cpu_seconds": 1.5}, "max_cpu_seconds: 1.5 is not a number of seconds"),
        ({"on_max_output": "drop"}, "on_max_output: 'drop' is not truncate or fail"),
    ],
)
def test_a_malformed_limit_is_refused_naming_the_field(assignment, error):
    with pytest.raises(LimitsError) as refused:
        Limits.of(assignment)
    assert str(refused.value) == error


def test_without_a_cgroup_the_supervisor_sets_rlimits():
    held = Held(Limits(max_memory=64 * MIB, max_cpu_seconds=2), None, platform="linux")
    assert held.supervisor_args() == ["--rlimit", "data", str(64 * MIB), "--rlimit", "cpu", "2"]
    elsewhere = Held(Limits(max_memory=64 * MIB), None, platform="darwin")
    assert elsewhere.supervisor_args() == ["--rlimit", "as", str(64 * MIB)]


def test_in_a_cgroup_the_command_joins_it_and_keeps_a_cpu_rlimit_per_process(tmp_path):
    cgroup = RunCgroup(
        memory=Place(1, "/m"), memory_dir="/m/run", cpu=Place(2, "/u"), cpu_dir="/u/run"
    )
    cgroup.made = ["/m/run", "/u/run"]
    held = Held(Limits(max_memory=64 * MIB, max_cpu_seconds=2), cgroup, platform="linux")
    assert held.supervisor_args() == [
        "--cgroup", "/m/run", "--cgroup", "/u/run", "--rlimit", "cpu", "2"
    ]  # fmt: skip
    assert held.how() == "memory 64 MiB (its cgroup), CPU 2 s (its cgroup)"


def test_under_setrlimit_a_failed_run_that_says_it_ran_out_of_memory_is_past_its_limit():
    held = Held(Limits(max_memory=64 * MIB), None, platform="linux")
    said = "Traceback (most recent call last):\n  ...\nMemoryError\n"
    assert held.verdict(1, said, None) == "memory limit 64 MiB exceeded"
    assert held.verdict(1, "x: Cannot allocate memory\n", None) == "memory limit 64 MiB exceeded"
    assert held.verdict(0, said, None) is None  # it coped, and succeeded
    assert held.verdict(1, "no such file\n", None) is None


def test_in_a_cgroup_its_oom_kill_is_past_the_limit_whatever_the_exit(tmp_path):
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
    cgroup = RunCgroup(memory=Place(2, "/"), memory_dir=str(tmp_path))
    held = Held(Limits(max_memory=64 * MIB), cgroup, platform="linux")
    assert held.verdict(0, "", None) == "memory limit 64 MiB exceeded"
    (tmp_path / "memory.events").write_text("oom 0\noom_kill 0\n")
    assert held.verdict(1, "MemoryError", None) is None  # the cgroup says what happened


def test_a_v1_kernel_that_does_not_count_oom_kills_tells_by_its_failures(tmp_path):
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")
    (tmp_path / "memory.failcnt").write_text("12\n")
    cgroup = RunCgroup(memory=Place(1, "/"), memory_dir=str(tmp_path))
    held = Held(Limits(max_memory=64 * MIB), cgroup, platform="linux")
    assert held.verdict(-signal.SIGKILL, "", None) == "memory limit 64 MiB exceeded"
    assert held.verdict(0, "", None) is None


def test_a_run_whose_cpu_time_reached_its_limit_is_past_it():
    held = Held(Limits(max_cpu_seconds=2), None, platform="linux")
    assert held.verdict(0, "", 2.01) == "CPU limit 2 s exceeded"
    assert held.verdict(152, "", 2.0) == "CPU limit 2 s exceeded"  # sh: its child's SIGXCPU
    assert held.verdict(-signal.SIGXCPU, "", None) == "CPU limit 2 s exceeded"
    assert held.verdict(1, "", 1.2) is None


def test_the_cpu_time_below_a_process_counts_its_processes_those_ended_included():
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    script = (
        "import subprocess, sys, time\n"
        f"subprocess.run([sys.executable, '-c', {burn!r}])\n"  # ended and reaped
        f"child = subprocess.Popen([sys.executable, '-c', {burn!r} + 'print(\"burnt\", "
        "flush=True); time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(process.stdout.readline())
        assert process.stdout.readline() == "burnt\n"
        # Two times 0.3 s, /proc's count running a little short.
        assert tree_cpu_seconds(process.pid) >= 0.5
    finally:
        for pid in (child, process.pid):
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()
    assert tree_cpu_seconds(process.pid) is None  # gone


def stat(pid, parent, state, utime, stime, cutime, cstime, name="sh"):
    """A /proc/PID/stat line (its fields 14-17 the times, in clock ticks)."""
    rest = [state, parent, pid, pid, 0, -1, 0, 0, 0, 0, 0, utime, stime, cutime, cstime]
    return f"{pid} ({name}) " + " ".join(map(str, rest)) + " 20 0 1 0 100\n"


def test_the_cpu_time_below_the_supervisor_leaves_its_own_out(tmp_path):
    tick = os.sysconf("SC_CLK_TCK")
    processes = [
        (10, 1, "S", 5 * tick, 0, 2 * tick, 0, "python supervisor"),  # own 5 s: not the job's
        (11, 10, "S", tick, 0, 3 * tick, tick, "sh"),  # 1 s, and 4 s of children it reaped
        (12, 11, "R", 2 * tick, tick, 0, 0, "a) odd (name"),  # 3 s
        (13, 12, "Z", tick, 0, 0, 0, "ended"),  # 1 s, not yet reaped
        (20, 1, "R", 50 * tick, 0, 0, 0, "unrelated"),
    ]
    for pid, *fields in processes:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(stat(pid, *fields))
    assert tree_cpu_seconds(10, proc=str(tmp_path)) == 2 + 1 + 4 + 3 + 1
    assert tree_cpu_seconds(99, proc=str(tmp_path)) is None


def test_the_cpu_is_looked_at_no_sooner_than_it_could_have_run_out(monkeypatch):
    held = Held(Limits(max_cpu_seconds=100), None, platform="linux")
    looked = []
    monkeypatch.setattr(held, "cpu_seconds", lambda root: looked.append(root) or 10.0)
    assert not held.over_cpu(0.0, 1)
    assert not held.over_cpu(0.5, 1)  # 90 s left: not before a second
    assert looked == [1]
    monkeypatch.setattr(held, "cpu_seconds", lambda root: 100.0)
    assert held.over_cpu(1.0, 1)


def supervised(*options, preexec_fn=None):
    """What `cat /proc/self/limits` says run under the supervisor with `options`."""
    read, write = os.pipe()
    try:
        command = [sys.executable, "-I", "-S", SUPERVISOR, str(read), "1", *options, "--"]
        command += ["sh", "-c", "cat /proc/self/limits"]
        # In a process group of its own, as the agent starts it: it ends its group.
        done = subprocess.run(
            command, pass_fds=(read,), capture_output=True, text=True, timeout=30,
            preexec_fn=preexec_fn, start_new_session=True,
        )  # fmt: skip
    finally:
        os.close(read)
        os.close(write)
    assert done.returncode == 0, done.stderr
    return {
        line[:26].strip(): line[26:].split()[:2]
        for line in done.stdout.splitlines()
        if line.startswith("Max")
    }


def test_the_supervisor_sets_the_rlimits_on_the_command():
    limits = supervised("--rlimit", "cpu", "7", "--rlimit", "data", str(64 * MIB))
    assert limits["Max cpu time"] == ["7", "8"]  # SIGKILL a second after SIGXCPU
    assert limits["Max data size"] == [str(64 * MIB)] * 2


def test_the_supervisor_never_sets_an_rlimit_above_the_agents_own():
    def lowered():
        resource.setrlimit(resource.RLIMIT_DATA, (32 * MIB, 32 * MIB))

    limits = supervised("--rlimit", "data", str(64 * MIB), preexec_fn=lowered)
    assert limits["Max data size"] == [str(32 * MIB)] * 2
