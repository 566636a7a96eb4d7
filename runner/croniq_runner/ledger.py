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
"""

import contextlib
import fcntl
import logging
import os
import signal
import threading
import time

log = logging.getLogger("croniq.runner")

LEFTOVER_WAIT = 5.0


def boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return "-"


def start_time(pid):
    """The start time of process `pid` (clock ticks since boot), or None."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; fields after it are plain.
    return stat.rsplit(")", 1)[1].split()[19]


def group_members(pgid):
    """Live (not zombie) processes of group `pgid`, from /proc (none
    known without it)."""
    members = []
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
    def __init__(self, directory):
        self.directory = directory
        self.path = os.path.join(directory, f"jobs-{os.getpid()}.ledger")
        self.entries = {}  # pgid -> (start time, execution id)
        self.handle = None
        self.lock = threading.Lock()  # jobs start and end on their own threads

    def open(self):
        """End what dead incarnations left running, then start this agent's
        ledger. Returns the process groups ended."""
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        ended = []
        for name in sorted(os.listdir(self.directory)):
            if name.endswith(".ledger") and name != os.path.basename(self.path):
                ended += self.end_leftovers(os.path.join(self.directory, name))
        self.handle = open(self.path, "w")  # noqa: SIM115 (held for the agent's life)
        fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.write()
        return ended

    def end_leftovers(self, path):
        """Kill the groups of the ledger at `path` if no live agent holds it."""
        try:
            handle = open(path)  # noqa: SIM115 (closed below)
        except OSError:
            return []
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return []  # its agent still runs and watches its own jobs
            lines = handle.read().splitlines()
            ended = []
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
            os.unlink(path)
        return ended

    def end_group(self, pgid, started):
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

    def add(self, pgid, execution_id):
        with self.lock:
            self.entries[pgid] = (start_time(pgid) or "-", execution_id)
            self.write()

    def remove(self, pgid):
        with self.lock:
            if self.entries.pop(pgid, None) is not None:
                self.write()

    def write(self):
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

    def close(self):
        """A clean exit: nothing of this agent is left to end."""
        with self.lock:
            if self.handle is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
                self.handle.close()
                self.handle = None
