"""A run's limits on the agent (docs/design.md §15): read from its
assignment, held while it runs, and what they say of how it ended.

- `max_output`: what its log keeps (output_cap.py); with `on_max_output:
  fail` the agent ends the run once its output is past it.
- `max_memory`: the memory of the command's processes together, in the
  run's cgroup (cgroups.py) where the agent may make one; else each
  process's own (setrlimit: RLIMIT_DATA on Linux, where the heap and every
  private writable mapping count, thread stacks included; RLIMIT_AS
  elsewhere), set by the supervisor on the command before it starts. Past
  it the kernel kills in the cgroup; under setrlimit an allocation fails
  and the program says so as it dies (MemoryError, "Cannot allocate
  memory", "out of memory").
- `max_cpu_seconds`: each process's CPU time (RLIMIT_CPU: SIGXCPU at the
  limit, SIGKILL a second later) and all of them together: the cgroup's
  count, else the process tree's below the supervisor (/proc), which the
  agent watches and ends the run at.

A run past a limit fails with exit code null and an error naming it:
"memory limit 64 MiB exceeded", "CPU limit 2 s exceeded", "output limit
1 MiB exceeded".

Standard library only.
"""

import os
import re
import signal
import sys
from dataclasses import dataclass
from typing import Any

from croniq_runner.cgroups import Cgroups, RunCgroup
from croniq_runner.sizes import MIB, shown

# The log's limit of an assignment without one (a server that predates limits).
DEFAULT_MAX_OUTPUT = MIB
TRUNCATE = "truncate"
FAIL = "fail"
# What a program says as it dies of an allocation setrlimit refused
# (Python, C's strerror(ENOMEM), C++, Go and the JVM, glibc, node).
MEMORY_SAID = re.compile(
    r"MemoryError|Cannot allocate memory|bad_alloc|out of memory|memory exhausted",
    re.IGNORECASE,
)
# How a command ends that RLIMIT_CPU ended (SIGXCPU), or whose shell says so.
XCPU = (-signal.SIGXCPU, 128 + signal.SIGXCPU)
# How often the agent looks at a run's CPU time at most, and at least.
CPU_LOOK_MIN = 0.1
CPU_LOOK_MAX = 1.0


class LimitsError(Exception):
    """An assignment's limit this agent cannot hold: the run fails unstarted."""


def size_of(assignment: dict[str, Any], key: str) -> int | None:
    value = assignment.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LimitsError(f"{key}: {value!r} is not a number of bytes")
    return value


@dataclass(frozen=True)
class Limits:
    """The limits an assignment sets."""

    max_output: int = DEFAULT_MAX_OUTPUT
    fail_on_output: bool = False
    max_memory: int | None = None
    max_cpu_seconds: int | None = None

    @classmethod
    def of(cls, assignment: dict[str, Any]) -> "Limits":
        """The limits of `assignment`; LimitsError naming the field."""
        policy = assignment.get("on_max_output") or TRUNCATE
        if policy not in (TRUNCATE, FAIL):
            raise LimitsError(f"on_max_output: {policy!r} is not truncate or fail")
        seconds = assignment.get("max_cpu_seconds")
        if seconds is not None and (
            isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1
        ):
            raise LimitsError(f"max_cpu_seconds: {seconds!r} is not a number of seconds")
        return cls(
            max_output=size_of(assignment, "max_output") or DEFAULT_MAX_OUTPUT,
            fail_on_output=policy == FAIL,
            max_memory=size_of(assignment, "max_memory"),
            max_cpu_seconds=seconds,
        )

    @property
    def of_processes(self) -> bool:
        """Whether a command's processes are limited (memory or CPU)."""
        return bool(self.max_memory or self.max_cpu_seconds)

    def output_error(self) -> str:
        return f"output limit {shown(self.max_output)} exceeded"

    def memory_error(self) -> str:
        return f"memory limit {shown(self.max_memory or 0)} exceeded"

    def cpu_error(self) -> str:
        return f"CPU limit {self.max_cpu_seconds} s exceeded"


def cpu_table(proc: str = "/proc") -> dict[int, tuple[int, float, float]]:
    """{pid: (parent pid, own CPU seconds, reaped children's)} of every
    process, zombies included (utime + stime, cutime + cstime)."""
    tick = os.sysconf("SC_CLK_TCK")
    table = {}
    try:
        entries = os.listdir(proc)
    except OSError:
        return {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, "stat")) as handle:
                stat = handle.read()
        except OSError:
            continue  # ended meanwhile
        fields = stat.rsplit(")", 1)[1].split()
        utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
        table[int(entry)] = (int(fields[1]), (utime + stime) / tick, (cutime + cstime) / tick)
    return table


def tree_cpu_seconds(root: int, proc: str = "/proc") -> float | None:
    """The CPU time of every process below `root` (the supervisor, whose
    own is not the job's), those ended included: each in the time of the
    parent that reaped it, or in `root`'s as the subreaper. None without
    /proc or `root`."""
    table = cpu_table(proc)
    if root not in table:
        return None
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    total, todo = table[root][2], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        total += table[pid][1] + table[pid][2]
        todo += children.get(pid, ())
    return total


class Held:
    """How one command's memory and CPU limits are held: its cgroup, the
    rlimits the supervisor sets, and what they say once it has ended."""

    def __init__(self, limits: Limits, cgroup: RunCgroup | None, platform: str = sys.platform):
        self.limits = limits
        self.cgroup = cgroup or RunCgroup()
        self.linux = platform.startswith("linux")
        self.cpu_seen: float | None = None
        self.next_cpu_look = 0.0

    @classmethod
    def make(cls, limits: Limits, cgroups: Cgroups | None, execution: int) -> "Held":
        """The run's cgroup made where `cgroups` says the agent may."""
        cgroup = None
        if cgroups:
            cgroup = cgroups.make(execution, limits.max_memory, bool(limits.max_cpu_seconds))
        return cls(limits, cgroup)

    def how(self) -> str:
        """How the limits are held, for the agent's log."""
        parts = []
        if self.limits.max_memory:
            where = "its cgroup" if self.cgroup.memory else "setrlimit per process"
            parts.append(f"memory {shown(self.limits.max_memory)} ({where})")
        if self.limits.max_cpu_seconds:
            where = "its cgroup" if self.cgroup.cpu else "its process tree"
            parts.append(f"CPU {self.limits.max_cpu_seconds} s ({where})")
        return ", ".join(parts)

    def supervisor_args(self) -> list[str]:
        """The supervisor's options that set them (supervisor.py)."""
        args = []
        for directory in self.cgroup.joined:
            args += ["--cgroup", directory]
        if self.limits.max_memory and self.cgroup.memory is None:
            args += ["--rlimit", "data" if self.linux else "as", str(self.limits.max_memory)]
        if self.limits.max_cpu_seconds:
            args += ["--rlimit", "cpu", str(self.limits.max_cpu_seconds)]
        return args

    def cpu_seconds(self, root: int) -> float | None:
        """The CPU time the command's processes have used so far."""
        if self.cgroup.cpu is not None:
            return self.cgroup.cpu_seconds()
        return tree_cpu_seconds(root)

    def over_cpu(self, now: float, root: int) -> bool:
        """Whether the run's CPU time is past its limit, looked at no more
        often than it could have got there (all CPUs busy) since the last
        look, and at least every CPU_LOOK_MAX seconds."""
        limit = self.limits.max_cpu_seconds
        if not limit or now < self.next_cpu_look:
            return False
        used = self.cpu_seconds(root)
        if used is not None:
            self.cpu_seen = used
        left = limit - (used or 0.0)
        wait = left / (os.cpu_count() or 1)
        self.next_cpu_look = now + min(CPU_LOOK_MAX, max(CPU_LOOK_MIN, wait))
        return used is not None and used >= limit

    def verdict(self, returncode: int | None, said: str, cpu_at_end: float | None) -> str | None:
        """The error of a command that ended with `returncode`, its output
        ending with `said`, having used `cpu_at_end` seconds of CPU, when a
        limit ended it; None otherwise."""
        if self.limits.max_memory and self.memory_exceeded(returncode, said):
            return self.limits.memory_error()
        limit = self.limits.max_cpu_seconds
        if limit:
            used = cpu_at_end if cpu_at_end is not None else self.cpu_seen
            # /proc's count of a process's time is sampled and runs short of
            # the kernel's own, which RLIMIT_CPU reads: a process it ended
            # says so by its signal (its shell by 128 + the signal).
            if returncode in XCPU or (used is not None and used >= limit):
                return self.limits.cpu_error()
        return None

    def over_memory(self) -> bool:
        """Whether the kernel has killed a process of the run for its
        cgroup's memory limit (v1 kills one process: the run is ended)."""
        return self.cgroup.memory is not None and (self.cgroup.oom_kills() or 0) > 0

    def memory_exceeded(self, returncode: int | None, said: str) -> bool:
        failed = returncode != 0
        if self.cgroup.memory is not None:
            kills = self.cgroup.oom_kills()
            if kills is None:  # a kernel before 4.13: the limit was reached, and the run died
                return failed and self.cgroup.failures() > 0
            return kills > 0
        return failed and MEMORY_SAID.search(said) is not None

    def close(self) -> None:
        """Remove the run's cgroups."""
        self.cgroup.remove()
