"""The control groups a run's memory is limited in and its CPU time counted
in (docs/design.md §15), where this agent may make them.

At start the agent looks where it stands (`Cgroups.probe`: its own cgroups,
from /proc/self/cgroup and /proc/self/mountinfo) and keeps, for memory and
for CPU, the first place that works:

- cgroup v2, below the agent's own cgroup when the agent may write there.
  CPU time is counted in any v2 cgroup (`cpu.stat`). A memory limit needs
  the memory controller given to the agent's cgroup's children: taken as
  it is when it already is (`cgroup.subtree_control`), else turned on only
  where the cgroup is the agent's to manage, delegated to it (systemd's
  `Delegate=yes` marks it) or the root of its namespace (a container's),
  and the agent alone in it: a cgroup with children under a controller may
  hold no process, so the agent first moves itself into a leaf of its own,
  `croniq-agent`.
- cgroup v1, a cgroup below the agent's own in the `memory` hierarchy
  (`memory.limit_in_bytes`) and in the `cpuacct` one (`cpuacct.usage`).

A run gets a cgroup named croniq-AGENTPID-EXECUTION-RANDOM in each place
it needs (`Cgroups.make`); the supervisor puts the command in them before
it starts it (supervisor.py, --cgroup), so every process it starts is in
them too. Where none works the agent says so once at start, and a job's
memory is limited per process instead (limits.py, setrlimit).

Standard library only.
"""

import contextlib
import logging
import os
import secrets
import signal
import time
from dataclasses import dataclass, field

log = logging.getLogger("croniq.runner")

PREFIX = "croniq-"
AGENT_LEAF = "croniq-agent"
# How long a run's cgroup may take to empty once its processes were killed.
REMOVE_WAIT = 2.0


@dataclass(frozen=True)
class Mount:
    """A cgroup hierarchy mounted on this machine, from /proc/self/mountinfo."""

    version: int  # 1 or 2
    path: str  # where it is mounted
    root: str  # the hierarchy's directory mounted there
    controllers: frozenset[str]  # v1: the hierarchy's; v2: none here (its files say)


@dataclass(frozen=True)
class Place:
    """Where the runs' cgroups of one kind go: below `base`, the agent's own
    cgroup in a hierarchy of `version`."""

    version: int
    base: str


def mounts(mountinfo: str) -> list[Mount]:
    """The cgroup hierarchies of a mountinfo text."""
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        after = line.split(" - ", 1)[1].split()
        if len(after) < 3 or after[0] not in ("cgroup", "cgroup2"):
            continue
        root, path = unescaped(fields[3]), unescaped(fields[4])
        if after[0] == "cgroup2":
            found.append(Mount(2, path, root, frozenset()))
        else:
            options = set(after[2].split(",")) | set(fields[5].split(","))
            found.append(Mount(1, path, root, frozenset(options)))
    return found


def unescaped(text: str) -> str:
    """A mountinfo path: spaces and such are written as octal escapes."""
    return text.encode().decode("unicode_escape") if "\\" in text else text


def own_cgroups(cgroup: str) -> dict[str, str]:
    """{hierarchy: path} of a /proc/PID/cgroup text: "2" for v2, and for v1
    each controller of a line ("memory", "cpuacct", ...)."""
    found = {}
    for line in cgroup.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        path = path.removesuffix(" (deleted)")
        if number == "0" and controllers == "":
            found["2"] = path
        else:
            for controller in controllers.split(","):
                if controller:
                    found[controller] = path
    return found


def directory(mount: Mount, path: str) -> str | None:
    """Where cgroup `path` of `mount`'s hierarchy is in the file system (None
    when the mount does not show it)."""
    root = mount.root.rstrip("/")
    if path != root and not path.startswith(root + "/") and root:
        return None
    inside = path[len(root) :].strip("/")
    return os.path.join(mount.path, inside) if inside else mount.path


def read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""


def write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def fields_of(text: str) -> dict[str, int]:
    """{key: number} of a flat-keyed cgroup file (`cpu.stat`, `memory.events`)."""
    found = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            found[key] = int(value)
    return found


def delegated(directory: str, path: str) -> bool:
    """Whether v2 cgroup `directory` (at `path`) is the agent's to manage:
    the root of its cgroup namespace (a container's), or marked delegated
    (systemd's Delegate=yes sets the `trusted.delegate` or `user.delegate`
    attribute)."""
    if path == "/":
        return True
    for name in ("trusted.delegate", "user.delegate"):
        with contextlib.suppress(OSError, AttributeError):
            if os.getxattr(directory, name) == b"1":
                return True
    return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class RunCgroup:
    """One run's cgroups: the directories its command joins, and what they
    tell of it."""

    memory: Place | None = None
    memory_dir: str | None = None
    cpu: Place | None = None
    cpu_dir: str | None = None
    made: list[str] = field(default_factory=list)  # in the order made

    @property
    def joined(self) -> list[str]:
        """The directories the command joins (supervisor.py --cgroup)."""
        return list(self.made)

    def cpu_seconds(self) -> float | None:
        """The CPU time of every process that was in it, or None."""
        if self.cpu is None or self.cpu_dir is None:
            return None
        if self.cpu.version == 2:
            usage = fields_of(read(os.path.join(self.cpu_dir, "cpu.stat"))).get("usage_usec")
            return None if usage is None else usage / 1e6
        text = read(os.path.join(self.cpu_dir, "cpuacct.usage")).strip()
        return int(text) / 1e9 if text.isdigit() else None

    def oom_kills(self) -> int | None:
        """How many of its processes the kernel killed for its memory limit
        (None: this kernel does not say; `failures` then tells)."""
        if self.memory is None or self.memory_dir is None:
            return 0
        if self.memory.version == 2:
            events = fields_of(read(os.path.join(self.memory_dir, "memory.events")))
            return events.get("oom_kill", 0) + events.get("oom_group_kill", 0)
        control = fields_of(read(os.path.join(self.memory_dir, "memory.oom_control")))
        return control.get("oom_kill")

    def failures(self) -> int:
        """v1: how often its memory reached the limit (some reclaimed)."""
        if self.memory_dir is None:
            return 0
        text = read(os.path.join(self.memory_dir, "memory.failcnt")).strip()
        return int(text) if text.isdigit() else 0

    def remove(self) -> None:
        """End what is left in it and remove it. The supervisor has ended
        the run's processes; one that escaped it (its supervisor killed)
        is still in the cgroup, which it never leaves."""
        for path in reversed(self.made):
            kill_file = os.path.join(path, "cgroup.kill")
            deadline = time.monotonic() + REMOVE_WAIT
            while True:
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() >= deadline:
                        log.warning("cannot remove the run's cgroup %s: processes left in it", path)
                        break
                if os.path.exists(kill_file):
                    with contextlib.suppress(OSError):
                        write(kill_file, "1")
                else:
                    for pid in read(os.path.join(path, "cgroup.procs")).split():
                        with contextlib.suppress(OSError, ValueError):
                            os.kill(int(pid), signal.SIGKILL)
                time.sleep(0.05)


class Cgroups:
    """Where this agent makes its runs' cgroups: a Place for memory limits
    and one for CPU counts, each None where it may make none."""

    def __init__(self, memory: Place | None = None, cpu: Place | None = None) -> None:
        self.memory = memory
        self.cpu = cpu

    def __bool__(self) -> bool:
        return self.memory is not None or self.cpu is not None

    def describe(self) -> str:
        """What the agent's log says at start."""

        def said(place: Place | None, what: str, otherwise: str) -> str:
            if place is None:
                return f"{what}: {otherwise}"
            return f"{what}: cgroup v{place.version} below {place.base}"

        return "; ".join(
            [
                said(self.memory, "memory limits", "per process (setrlimit), no cgroup"),
                said(self.cpu, "CPU time", "counted from /proc, per process (setrlimit)"),
            ]
        )

    @classmethod
    def probe(cls, proc: str = "/proc", pid: int | None = None) -> "Cgroups":
        """Where this process may make cgroups (see the module's text);
        empty where it may make none, or off Linux."""
        pid = os.getpid() if pid is None else pid
        found_mounts = mounts(read(os.path.join(proc, "self", "mountinfo")))
        own = own_cgroups(read(os.path.join(proc, "self", "cgroup")))
        memory = cpu = None
        for mount in found_mounts:
            if mount.version != 2 or "2" not in own:
                continue
            base = directory(mount, own["2"])
            if base is None or not writable(base):
                continue
            cpu = cpu or Place(2, base)
            if memory is None and memory_for_children(base, own["2"], pid):
                memory = Place(2, base)
        for mount in found_mounts:
            if mount.version != 1:
                continue
            for controller, kind in (("memory", "memory"), ("cpuacct", "cpu")):
                if controller not in mount.controllers or controller not in own:
                    continue
                if (memory if kind == "memory" else cpu) is not None:
                    continue
                base = directory(mount, own[controller])
                if base is None or not writable(base):
                    continue
                if kind == "memory":
                    memory = Place(1, base)
                else:
                    cpu = Place(1, base)
        cgroups = cls(memory, cpu)
        cgroups.remove_stale()
        return cgroups

    def remove_stale(self) -> None:
        """Remove the empty cgroups left by agents no longer running (one
        killed before it could)."""
        for place in {p for p in (self.memory, self.cpu) if p is not None}:
            try:
                names = os.listdir(place.base)
            except OSError:
                continue
            for name in names:
                parts = name.split("-")
                ours = name.startswith(PREFIX) and len(parts) >= 3 and parts[1].isdigit()
                if ours and not alive(int(parts[1])):
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(place.base, name))

    def make(self, execution: int, max_memory: int | None, count_cpu: bool) -> RunCgroup:
        """A run's cgroups: its memory limited to `max_memory` bytes where a
        memory place is, its CPU counted (`count_cpu`) where a CPU place is.
        What cannot be made is left out and said in the agent's log (the
        caller falls back to setrlimit and /proc)."""
        name = f"{PREFIX}{os.getpid()}-{execution}-{secrets.token_hex(3)}"
        run = RunCgroup()
        if max_memory and self.memory is not None:
            path = made(self.memory, name, execution, "memory", max_memory)
            if path is not None:
                run.memory, run.memory_dir = self.memory, path
                run.made.append(path)
        if count_cpu and self.cpu is not None:
            if run.memory == self.cpu:  # one v2 cgroup does both
                run.cpu, run.cpu_dir = self.cpu, run.memory_dir
            else:
                path = made(self.cpu, name, execution, "CPU", None)
                if path is not None:
                    run.cpu, run.cpu_dir = self.cpu, path
                    run.made.append(path)
        return run


def made(place: Place, name: str, execution: int, what: str, max_memory: int | None) -> str | None:
    """The path of cgroup `name` made below `place`, its memory limited to
    `max_memory` when given; None (said in the log) when it cannot be."""
    path = os.path.join(place.base, name)
    try:
        os.mkdir(path)
    except OSError as error:
        log.warning("execution %s: no %s cgroup: %s", execution, what, error)
        return None
    if max_memory is None:
        return path
    try:
        limit_memory(place.version, path, max_memory)
    except OSError as error:
        log.warning("execution %s: no memory limit in its cgroup: %s", execution, error)
        with contextlib.suppress(OSError):
            os.rmdir(path)
        return None
    return path


def writable(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.W_OK)


def limit_memory(version: int, path: str, limit: int) -> None:
    """Set a run's memory limit in its cgroup at `path`; OSError when the
    limit cannot hold (the controller is not there). Swap is limited too
    where the kernel counts it, so the limit is not swapped around."""
    if version == 2:
        if not os.path.exists(os.path.join(path, "memory.max")):
            raise OSError(f"{path} has no memory controller")
        write(os.path.join(path, "memory.max"), str(limit))
        for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
            with contextlib.suppress(OSError):
                write(os.path.join(path, name), value)
        return
    write(os.path.join(path, "memory.limit_in_bytes"), str(limit))
    with contextlib.suppress(OSError):
        write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(limit))


def memory_for_children(base: str, path: str, pid: int) -> bool:
    """Whether the memory controller is given to `base`'s children: as it
    is, or turned on here, where the cgroup is the agent's to manage
    (`delegated`) and holds no process but the agent, which moves into a
    leaf of its own first."""
    if "memory" in read(os.path.join(base, "cgroup.subtree_control")).split():
        return True
    if "memory" not in read(os.path.join(base, "cgroup.controllers")).split():
        return False
    if not delegated(base, path):
        return False
    members = read(os.path.join(base, "cgroup.procs")).split()
    if members and members != [str(pid)]:
        return False  # others live here: moving them is not the agent's to do
    leaf = os.path.join(base, AGENT_LEAF)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(leaf)
        if members:
            write(os.path.join(leaf, "cgroup.procs"), str(pid))
        write(os.path.join(base, "cgroup.subtree_control"), "+memory")
    except OSError as error:
        log.warning("cannot give the memory controller to the runs' cgroups: %s", error)
        return False
    return True
