"""The parent of one job: it makes the job die with its agent.

    python -I -S supervisor.py FD GRACE [--output FD] [--user UID GID GROUPS]
        [--start-at T] [--cgroup DIR]... [--rlimit data|as|cpu N]...
        [--container ENGINE NAME] -- COMMAND...

The agent starts this script as the leader of the job's own process group,
and it starts COMMAND (`sh -c ...`) in that group. FD is the read end of a
pipe whose write end only the agent holds: when the agent dies, however it
dies (SIGKILL, the OOM killer), the pipe reads end-of-file and the
supervisor takes the whole group down: SIGTERM, then SIGKILL after GRACE
seconds. Otherwise it waits for COMMAND and ends as COMMAND ended (the same
exit code, or the same signal), so the agent reads the job's own status.

With --start-at, COMMAND starts when the monotonic clock (system-wide,
the agent's too) reaches T, not before: the agent starts the supervisor as
soon as work arrives ahead of its instant, so Python's start-up is over by
then. An agent gone or a SIGTERM meanwhile ends it with nothing started.
All the rest is done before T too (the program looked up in PATH): at T
the supervisor only starts COMMAND, spawned (posix_spawn: the C library's
vfork and exec, nothing of this process copied), or forked when the child
must set the job's limits or user first.

With --output, FD is the read end of the pipe the job writes its output
to (the agent reads it). The supervisor keeps it, the job does not get it,
and once the agent is gone the supervisor reads and drops what comes: a
job ending on the agent's death may write (its trap's words, or a shell's
"Terminated" for a job it waited on), and a write to a pipe nobody can
read is SIGPIPE, which would kill it before its trap had run.

A pipe rather than PR_SET_PDEATHSIG: the kernel sends that signal when the
*thread* that forked exits, and the agent starts jobs from threads that end
before the agent does; nor would it reach the shell's own children.

Every process the job starts ends with it, also one that left the group
(`setsid`, a daemon forked twice). On Linux the supervisor is a child
subreaper (PR_SET_CHILD_SUBREAPER): an orphan below it is re-parented to it,
not to init, so while it lives every such process stays below it, where
/proc shows it (`descendants`). It reaps those orphans as they end. When
COMMAND exits, what it left (in the group or not) gets SIGTERM, then SIGKILL
after LEFTOVER_GRACE seconds, before the supervisor exits: once it is gone
they would be re-parented beyond its reach. The agent's own kills (timeout,
cancel, fencing, shutdown: job.py) reach them the same way, through
`terminate` and `kill_all`, and SIGKILL the supervisor last. Elsewhere (no
/proc, no subreaper) the process group is all that is ended, as before.
The supervisor, not the agent, is the subreaper: the agent would have to
reap every orphan, and would take the exit statuses its `subprocess`
objects wait for. What escapes still: a process a job has started after
SIGKILLing its own supervisor, which only a job run as the agent's user
can do (with --user the supervisor stays root, out of the job's reach).

With --user the job runs as that account (as root only): the supervisor
stays root, so the job can neither signal it nor read the agent's /proc.

A job's limits (docs/design.md §15, limits.py) are set on COMMAND before it
starts, by the forked child, so every process it starts inherits them: it
joins each --cgroup DIR (the agent made them, its memory limited and its
CPU counted there), and sets each --rlimit (data or as: bytes of each
process's memory; cpu: seconds of each process's CPU time, SIGXCPU then and
SIGKILL a second later). The supervisor itself stays outside them: its own
memory and CPU are not the job's. A cgroup the child cannot join fails the
job unstarted (exit 126) rather than run it unlimited.

With --container, COMMAND is `ENGINE run` of a container job's container
NAME (container_job.py), which lives in the engine, not below this
process: ending COMMAND would leave it running. When the agent dies, the
container is stopped first through ENGINE (`stop`: SIGTERM, SIGKILL after
GRACE), then COMMAND and the rest of the group end as usual, and last the
container is removed (`rm -f`: one COMMAND created meanwhile too).

Runs as a script with `-I -S` (no current directory on sys.path, no PYTHON*
variables, no site-packages: faster to start) and imports only the
standard library.
"""

import contextlib
import ctypes
import os
import resource
import select
import signal
import sys
import threading
import time

# The last LAST_STRETCH seconds before the instant are slept in turns of
# STEP. On a busy machine a process that has just started (Python's
# start-up is one burst of CPU) and then sleeps through its whole wait gets
# a CPU after waking later than one that has been waking in short turns,
# which the scheduler treats as interactive: 2-3 ms at p50 with both cores
# of a small machine busy (bench/floor.py), against ten wake-ups a job.
LAST_STRETCH = 0.05
STEP = 0.005
# What COMMAND leaves running when it exits gets this long after SIGTERM.
LEFTOVER_GRACE = 2.0
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
# kill_all stops after this many passes over /proc: a pass only finds what
# forked before its SIGKILL landed, so a few always suffice.
KILL_PASSES = 50

# How long one engine command (stop past its grace, rm) may take on agent death.
ENGINE_TIMEOUT = 30.0

# --user: (uid, gid, supplementary groups).
UserIds = tuple[int, int, list[int]]
# --rlimit: (resource, soft, hard).
Rlimit = tuple[int, int, int]
RLIMITS = {"data": "RLIMIT_DATA", "as": "RLIMIT_AS", "cpu": "RLIMIT_CPU"}
# What the job's processes get past RLIMIT_CPU before SIGKILL: SIGXCPU ends
# most programs at once, and one that catches it gets this much more.
CPU_HARD_SLACK = 1
# --container: (the engine's command line, the container's name).
Container = tuple[str, str]
# {pid: (parent pid, process group, start time)}; builtin generics only: the
# supervisor imports as little as it can (it starts once per job).
Table = dict[int, tuple[int, int, str]]
# Python ignores these at its start, and an ignored signal stays ignored
# across exec: the job gets them back at their default, as a command a shell
# or cron starts has them (`yes | head -1` ends quietly by SIGPIPE).
RESTORED_SIGNALS = [signal.SIGPIPE, signal.SIGXFSZ]


class Options:
    """The supervisor's command line (see the module's text)."""

    def __init__(self, argv: list[str]) -> None:
        split = argv.index("--")
        options, self.command = argv[:split], argv[split + 1 :]
        self.fd, self.grace = int(options[0]), float(options[1])
        self.output: int | None = None
        self.account: UserIds | None = None
        self.start_at: float | None = None
        self.cgroups: list[str] = []
        self.rlimits: list[Rlimit] = []
        self.container: Container | None = None
        rest = options[2:]
        while rest:
            if rest[0] == "--output":
                self.output, rest = int(rest[1]), rest[2:]
            elif rest[0] == "--user":
                uid, gid, groups = rest[1:4]
                self.account = (int(uid), int(gid), [int(g) for g in groups.split(",") if g])
                rest = rest[4:]
            elif rest[0] == "--start-at":
                self.start_at, rest = float(rest[1]), rest[2:]
            elif rest[0] == "--cgroup":
                self.cgroups.append(rest[1])
                rest = rest[2:]
            elif rest[0] == "--rlimit":
                self.rlimits.append(rlimit(rest[1], int(rest[2])))
                rest = rest[3:]
            elif rest[0] == "--container":
                self.container, rest = (rest[1], rest[2]), rest[3:]
            else:
                raise SystemExit(f"croniq-runner supervisor: unknown option {rest[0]}")


def rlimit(name: str, value: int) -> Rlimit:
    """The (resource, soft, hard) of --rlimit NAME VALUE."""
    resource_id = getattr(resource, RLIMITS[name])
    if name == "cpu":
        return resource_id, value, value + CPU_HARD_SLACK
    return resource_id, value, value


def wait_for_start(start_at: float, fd: int) -> None:
    """Sleep until the monotonic clock reaches `start_at`, watching the
    agent's pipe: end-of-file (the agent is gone) exits, nothing started."""
    while (left := start_at - time.monotonic()) > 0:
        readable, _, _ = select.select([fd], [], [], next_turn(left))
        if readable and not os.read(fd, 1):
            os._exit(1)


def next_turn(left: float) -> float:
    """How long to sleep with `left` seconds to the instant: until
    LAST_STRETCH before it, then in turns of STEP."""
    if left > LAST_STRETCH + STEP:
        return left - LAST_STRETCH
    return min(left, STEP)


def executable(name: str) -> str:
    """The path of program `name`, looked up in PATH."""
    if os.sep in name:
        return name
    for directory in os.get_exec_path():
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK):
            return path
    return name  # execv reports it missing


def start(
    path: str,
    command: list[str],
    account: UserIds | None,
    fd: int,
    cgroups: list[str],
    rlimits: list[Rlimit],
) -> int:
    """Start COMMAND (its program at `path`); in `cgroups` and under
    `rlimits`, as `account` when given. Without any of them, spawned;
    with them, forked."""
    if account is None and not cgroups and not rlimits:
        return spawn(path, command)
    return fork(path, command, account, fd, cgroups, rlimits)


def spawn(path: str, command: list[str]) -> int:
    """posix_spawn: the C library starts the program from a child that
    shares this process's memory until its exec, so nothing of this
    process is copied and no Python runs in between. What a fork takes at
    the instant (page tables, Python's after-fork work) is left out.
    Failing, the supervisor exits as the child would have."""
    try:
        return os.posix_spawn(path, command, os.environ, setsigdef=RESTORED_SIGNALS)
    except OSError as error:
        os.write(2, f"croniq-runner: cannot start the job: {error}\n".encode())
        os._exit(127)


def fork(
    path: str,
    command: list[str],
    account: UserIds | None,
    fd: int,
    cgroups: list[str],
    rlimits: list[Rlimit],
) -> int:
    """Fork and exec COMMAND; in the child, in `cgroups` and under `rlimits`,
    as `account` when given. The program was looked up before: once the
    child is another user, Python's own library may be out of its reach,
    so it imports nothing more."""
    pid = os.fork()
    if pid:
        return pid
    try:
        join(cgroups)
    except OSError as error:
        os.write(2, f"croniq-runner: cannot start the job in its cgroup: {error}\n".encode())
        os._exit(126)
    try:
        os.close(fd)
        for signum in RESTORED_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        for resource_id, soft, hard in rlimits:
            # Never above what the agent itself may use (only root could raise it).
            _, ceiling = resource.getrlimit(resource_id)
            if ceiling != resource.RLIM_INFINITY:
                soft, hard = min(soft, ceiling), min(hard, ceiling)
            resource.setrlimit(resource_id, (soft, hard))
        if account is not None:
            uid, gid, groups = account
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)
        os.execv(path, command)
    except (OSError, ValueError) as error:
        os.write(2, f"croniq-runner: cannot start the job: {error}\n".encode())
    os._exit(127)


def join(cgroups: list[str]) -> None:
    """Move this process into each cgroup directory of `cgroups` (before it
    changes user: the agent made them as its own user)."""
    for directory in cgroups:
        with open(os.path.join(directory, "cgroup.procs"), "w") as procs:
            procs.write(str(os.getpid()))


def become_subreaper() -> bool:
    """Linux: make the orphans below this process its children instead of
    init's. Whether it worked (never elsewhere)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def process_table() -> Table:
    """{pid: (parent pid, process group, start time)} of every live (not
    zombie) process, from /proc; empty without it."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    table: Table = {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue  # ended meanwhile
        # The command name (field 2) may hold spaces; fields after it are plain.
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":
            table[int(entry)] = (int(fields[1]), int(fields[2]), fields[19])
    return table


def descendants(root: int, table: Table) -> list[int]:
    """The pids below `root` in `table` (children, theirs, ...). A zombie has
    none: its children were re-parented when it exited."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, ())
    return found


def send(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def terminate(root: int, group: int) -> None:
    """SIGTERM process group `group` and every process below `root` outside
    it (each gets the signal once)."""
    table = process_table()
    for pid in descendants(root, table):
        if table[pid][1] != group:
            send(pid, signal.SIGTERM)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGTERM)


def kill_all(root: int) -> None:
    """SIGKILL every process below `root`, `root` spared, pass after pass
    until one finds none it has not killed yet: a process may fork until its
    SIGKILL lands, and while `root` lives (a subreaper) the orphans of the
    killed are re-parented to it, so the next pass finds them. Processes are
    known by pid and start time, so a pid reused meanwhile counts as new."""
    killed: set[tuple[int, str]] = set()
    for _ in range(KILL_PASSES):
        table = process_table()
        fresh = [pid for pid in descendants(root, table) if (pid, table[pid][2]) not in killed]
        if not fresh:
            return
        for pid in fresh:
            send(pid, signal.SIGKILL)
            killed.add((pid, table[pid][2]))


def others_in_group(table: Table) -> list[int]:
    """The pids of `table` in this process's group, this one left out."""
    me, group = os.getpid(), os.getpgid(0)
    return [pid for pid, (_, pgid, _) in table.items() if pgid == group and pid != me]


def left_running() -> bool:
    """Whether a live process other than this one is below it or in its group
    (always assumed without /proc, so a grace is waited out)."""
    if not os.path.isdir("/proc"):
        return True
    table = process_table()
    return bool(others_in_group(table) or descendants(os.getpid(), table))


def end_all(grace: float) -> None:
    """SIGTERM the group and every process below this one, then SIGKILL
    whatever is left after `grace` seconds, this process spared. Reaps
    nothing: the main thread may be waiting for the job's status."""
    me = os.getpid()
    terminate(me, os.getpgid(0))  # ignored by this process only
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and left_running():
        time.sleep(0.05)
    kill_all(me)
    # In the group but not below: re-parented away before the subreaper took
    # hold, or where there is none. killpg(0) would end this process too.
    for pid in others_in_group(process_table()):
        send(pid, signal.SIGKILL)


def engine(args: list[str], timeout: float) -> None:
    """Run a container engine's command, its output dropped: no one is left
    to read it, and whatever it says, what follows is the same."""
    import subprocess  # only a container job's supervisor needs it, once

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )


def watch_agent(
    fd: int,
    grace: float,
    agent_gone: threading.Event,
    container: Container | None = None,
    output: int | None = None,
) -> None:
    """Block until the agent's end of the pipe closes, then end everything:
    a container first (SIGTERM, SIGKILL after `grace`), which ends the
    engine's command with it, and removed last, once nothing can create it.
    The job's `output` is drained meanwhile, in place of the agent."""
    try:
        while os.read(fd, 1):
            pass  # the agent never writes; only end-of-file matters
    except OSError:
        pass
    agent_gone.set()
    if output is not None:
        threading.Thread(target=drain, args=(output,), daemon=True).start()
    if container is not None:
        path, name = container
        engine([path, "stop", "-t", str(max(0, round(grace))), name], grace + ENGINE_TIMEOUT)
    end_all(grace)
    if container is not None:
        engine([path, "rm", "-f", name], ENGINE_TIMEOUT)
    os.killpg(0, signal.SIGKILL)  # whatever is left, this process included


def drain(fd: int) -> None:
    """Read and drop what comes from `fd` until its end: the job's output
    once no agent reads it, so its writes neither fail nor fill the pipe."""
    with contextlib.suppress(OSError):
        while os.read(fd, 65536):
            pass


def wait_for(child: int) -> int:
    """The exit status of `child`; orphans re-parented here meanwhile are
    reaped as they end."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            return status


def reap_orphans() -> None:
    """Reap the orphans re-parented here that have ended, without waiting."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def end_like(status: int) -> None:
    """Exit the way the child did."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the job's crash, not ours
        if signum not in (signal.SIGKILL, signal.SIGSTOP):  # these keep their default
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # not reached: the signal ends this process
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def main(argv: list[str]) -> None:
    options = Options(argv)
    fd, grace = options.fd, options.grace
    become_subreaper()  # before anything below it can be orphaned
    # Before the instant: the lookup (os.get_exec_path imports), and the
    # agent's pipe kept from the job by its exec, spawned or forked.
    path = executable(options.command[0])
    os.set_inheritable(fd, False)
    if options.output is not None:
        os.set_inheritable(options.output, False)
    if options.start_at is not None:
        wait_for_start(options.start_at, fd)
    child = start(path, options.command, options.account, fd, options.cgroups, options.rlimits)
    # The agent signals the whole group; the job decides how to answer,
    # this process only passes the job's status on.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    agent_gone = threading.Event()
    watching = (fd, grace, agent_gone, options.container, options.output)
    threading.Thread(target=watch_agent, args=watching, daemon=True).start()
    status = wait_for(child)
    # What COMMAND left ends before this process does: once it is gone, its
    # orphans would be re-parented beyond reach. Without /proc nothing can
    # be seen: the agent ends the group, as before.
    if not agent_gone.is_set() and os.path.isdir("/proc") and left_running():
        end_all(LEFTOVER_GRACE)
        reap_orphans()
    if agent_gone.is_set():
        # Leftovers get the rest of the grace; the watcher ends them all.
        threading.Event().wait()
    end_like(status)


if __name__ == "__main__":
    main(sys.argv[1:])
