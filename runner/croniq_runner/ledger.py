"""The ledger of the process groups an agent's jobs run in. Standard library only.

Each agent keeps one file in its state directory, `jobs-<pid>.ledger`, and
holds an exclusive lock on it while it lives: the kernel drops the lock
when the process dies, however it dies. An agent starting under the same
state directory (the same runner name, by default) takes every unlocked
ledger as left by a dead incarnation and kills the process groups listed
there before it registers, so no job of a killed agent overlaps the retry
that the server's takeover starts at once.

A line is `<process group id> <leader start time> <execution id>`; the first
line names the boot. A group id is only killed when its leader still is
the process that was recorded (same start time), or when the leader is
gone: while a group has members its id cannot be given to a new process.

Container jobs' containers (container_job.py) live in their engine, not in
a process group: they are listed beside the ledger, in
`jobs-<pid>.containers` (agents that predate containers read only
`*.ledger`), a line `<engine> <container name> <execution id>`. A dead
incarnation's containers are removed (`ENGINE rm -f`) after its process
groups have ended, so no engine command of it can start one afterwards; a
name is the run's own (engine.container_name), whatever the boot.

The directory is trusted only when it is the agent's own: owned by the
agent's user and writable by no one else; otherwise the agent refuses to
start (UnsafeStateDir). Whoever else could write to it could plant a ledger
naming any process group, for the agent (root, with --run-as) to kill, or a
symbolic link where the agent writes its own. Inside it, every file is
reached through the directory opened once and checked (no path is looked up
twice), a ledger that is a symbolic link or not the agent's user's is ignored,
and the agent's own is created new, never opened through a link.
"""

import contextlib
import errno
import fcntl
import logging
import os
import shutil
import signal
import stat
import threading
import time
from typing import TextIO

from croniq_runner import engine as engines

log = logging.getLogger("croniq.runner")

LEFTOVER_WAIT = 5.0
LEDGER = ".ledger"
CONTAINERS = ".containers"
# Never through a symbolic link, never a FIFO that blocks the open.
READ_LEDGER = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
NEW_LEDGER = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeStateDir(Exception):
    """The state directory is not the agent's alone; the agent exits 2."""


def open_state_dir(directory: str) -> int:
    """A descriptor of `directory` (created for this user alone if missing),
    once it is checked to be this user's and writable by no one else."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        refuse_unless_own(directory, os.fstat(fd))
    except UnsafeStateDir:
        os.close(fd)
        raise
    return fd


def refuse_unless_own(directory: str, info: os.stat_result) -> None:
    me = os.geteuid()
    if info.st_uid != me:
        raise UnsafeStateDir(
            f"refusing the state directory {directory}: it is owned by uid {info.st_uid}, "
            f"not by this agent's uid {me}"
        )
    # Sticky or not: a writable directory lets another user add a ledger.
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeStateDir(
            f"refusing the state directory {directory}: its mode "
            f"{stat.S_IMODE(info.st_mode):#o} lets its group or others write to it "
            f"(chmod go-w {directory})"
        )


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return "-"


def start_time(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks since boot), or None."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; fields after it are plain.
    return stat.rsplit(")", 1)[1].split()[19]


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of group `pgid`, from /proc (none
    known without it)."""
    members: list[int] = []
    if not os.path.isdir("/proc"):
        return members
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


class Ledger:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.name = f"jobs-{os.getpid()}{LEDGER}"
        self.path = os.path.join(directory, self.name)
        self.entries: dict[int, tuple[str, int]] = {}  # pgid -> (start time, execution id)
        self.containers_name = f"jobs-{os.getpid()}{CONTAINERS}"
        self.containers: dict[str, tuple[str, int]] = {}  # name -> (engine, execution id)
        self.dir_fd: int | None = None  # the state directory, checked once and held
        self.handle: TextIO | None = None
        self.containers_handle: TextIO | None = None  # created with the first container
        self.lock = threading.Lock()  # jobs start and end on their own threads

    def open(self) -> list[int]:
        """End what dead incarnations left running, then start this agent's
        ledger. Returns the process groups ended. UnsafeStateDir when the
        directory is not this user's alone."""
        self.dir_fd = dir_fd = open_state_dir(self.directory)
        try:
            ended: list[int] = []
            # This agent's own name too: a dead agent may have had the same pid.
            for name in sorted(os.listdir(dir_fd)):
                if name.endswith(LEDGER):
                    ended += self.end_leftovers(name)
            # A list of containers whose ledger is gone has no agent left.
            for name in sorted(os.listdir(dir_fd)):
                if name.endswith(CONTAINERS) and not self.exists(ledger_of(name)):
                    self.end_containers(name)
            fd = os.open(self.name, NEW_LEDGER, 0o600, dir_fd=dir_fd)
            self.handle = os.fdopen(fd, "w")
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            self.close()
            raise
        self.write()
        return ended

    def open_leftover(self, name: str) -> TextIO | None:
        """The ledger `name` opened for reading, or None when it must not be
        trusted (a symbolic link, not a plain file, not this user's)."""
        path = os.path.join(self.directory, name)
        try:
            fd = os.open(name, READ_LEDGER, dir_fd=self.dir_fd)
        except OSError as error:
            if error.errno == errno.ELOOP:
                log.warning("ignoring %s: a symbolic link, not a ledger of this runner", path)
            return None
        info = os.fstat(fd)
        why = None
        if not stat.S_ISREG(info.st_mode):
            why = "not a plain file"
        elif info.st_uid != os.geteuid():
            why = f"owned by uid {info.st_uid}, not this agent's uid {os.geteuid()}"
        if why is not None:
            os.close(fd)
            log.warning("ignoring %s: %s", path, why)
            return None
        return os.fdopen(fd)

    def end_leftovers(self, name: str) -> list[int]:
        """Kill the groups of the ledger `name` if no live agent holds it."""
        handle = self.open_leftover(name)
        if handle is None:
            return []
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return []  # its agent still runs and watches its own jobs
            lines = handle.read().splitlines()
            ended: list[int] = []
            if lines and lines[0] == f"boot {boot_id()}":
                for line in lines[1:]:
                    pgid, started, execution_id = line.split()
                    if self.end_group(int(pgid), started):
                        log.warning(
                            "ended process group %s of execution %s, left running by a "
                            "previous run of this runner",
                            pgid,
                            execution_id,
                        )
                        ended.append(int(pgid))
            # Its groups have ended: none of its engine commands starts a
            # container any more.
            if self.exists(containers_of(name)):
                self.end_containers(containers_of(name))
            os.unlink(name, dir_fd=self.dir_fd)
        return ended

    def exists(self, name: str) -> bool:
        try:
            os.stat(name, dir_fd=self.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def end_containers(self, name: str) -> list[str]:
        """Remove the containers the list `name` of a dead incarnation names;
        the names of those the engine answered for. Removing a container
        already gone is no error."""
        handle = self.open_leftover(name)
        if handle is None:
            return []
        with handle:
            lines = handle.read().splitlines()
        ended = []
        for line in lines:
            parts = line.split()
            if len(parts) != 3 or parts[0] not in engines.ENGINES:
                continue
            engine_name, container, execution_id = parts
            path = shutil.which(engine_name)
            if path is None:
                log.error(
                    "cannot remove container %s of execution %s: %s is not installed",
                    container,
                    execution_id,
                    engine_name,
                )
                continue
            if engines.remove(engines.Engine(engine_name, path), container):
                log.warning(
                    "removed container %s of execution %s, if still there: left by a previous "
                    "run of this runner",
                    container,
                    execution_id,
                )
                ended.append(container)
        os.unlink(name, dir_fd=self.dir_fd)
        return ended

    def end_group(self, pgid: int, started: str) -> bool:
        """SIGKILL group `pgid` unless its id now belongs to another process;
        wait until it is gone. Whether anything was killed."""
        leader = start_time(pgid)
        if leader is not None and leader != started:
            return False  # the id was reused after the group ended
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        except PermissionError:
            log.error("cannot end process group %s: not permitted", pgid)
            return False
        deadline = time.monotonic() + LEFTOVER_WAIT
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        return True

    def add(self, pgid: int, execution_id: int) -> None:
        with self.lock:
            self.entries[pgid] = (start_time(pgid) or "-", execution_id)
            self.write()

    def remove(self, pgid: int) -> None:
        with self.lock:
            if self.entries.pop(pgid, None) is not None:
                self.write()

    def add_container(self, engine: str, name: str, execution_id: int) -> None:
        """A container job's container (`engine`: docker or podman)."""
        with self.lock:
            self.containers[name] = (engine, execution_id)
            self.write_containers()

    def remove_container(self, name: str) -> None:
        with self.lock:
            if self.containers.pop(name, None) is not None:
                self.write_containers()

    def write_containers(self) -> None:
        if self.handle is None:
            return  # closed (the agent is exiting), or never opened
        lines = [f"{engine} {name} {eid}" for name, (engine, eid) in self.containers.items()]
        try:
            if self.containers_handle is None:
                fd = os.open(self.containers_name, NEW_LEDGER, 0o600, dir_fd=self.dir_fd)
                self.containers_handle = os.fdopen(fd, "w")
            self.containers_handle.seek(0)
            self.containers_handle.truncate()
            self.containers_handle.write("".join(line + "\n" for line in lines))
            self.containers_handle.flush()
        except OSError as error:  # a full disk must not stop the jobs themselves
            log.warning(
                "cannot update the list of containers %s: %s",
                os.path.join(self.directory, self.containers_name),
                error,
            )

    def write(self) -> None:
        if self.handle is None:
            return  # closed: the agent is exiting
        lines = [f"boot {boot_id()}"]
        lines += [f"{pgid} {started} {eid}" for pgid, (started, eid) in self.entries.items()]
        try:
            self.handle.seek(0)
            self.handle.truncate()
            self.handle.write("\n".join(lines) + "\n")
            self.handle.flush()
        except OSError as error:  # a full disk must not stop the jobs themselves
            log.warning("cannot update the ledger of jobs %s: %s", self.path, error)

    def close(self) -> None:
        """A clean exit: nothing of this agent is left to end."""
        with self.lock:
            if self.containers_handle is not None:
                # Before the ledger: a list without its ledger is a dead one's.
                with contextlib.suppress(OSError):
                    os.unlink(self.containers_name, dir_fd=self.dir_fd)
                self.containers_handle.close()
                self.containers_handle = None
            if self.handle is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self.name, dir_fd=self.dir_fd)
                self.handle.close()
                self.handle = None
            if self.dir_fd is not None:
                os.close(self.dir_fd)
                self.dir_fd = None


def containers_of(ledger: str) -> str:
    """The name of the list of containers beside the ledger `ledger`."""
    return ledger.removesuffix(LEDGER) + CONTAINERS


def ledger_of(containers: str) -> str:
    return containers.removesuffix(CONTAINERS) + LEDGER
