"""The parent of one job: it makes the job die with its agent.

    python -I -S supervisor.py FD GRACE [--user UID GID GROUPS] [--start-at T] -- COMMAND...

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

A pipe rather than PR_SET_PDEATHSIG: the kernel sends that signal when the
*thread* that forked exits, and the agent starts jobs from threads that end
before the agent does; nor would it reach the shell's own children.

With --user the job runs as that account (as root only): the supervisor
stays root, so the job can neither signal it nor read the agent's /proc.

Runs as a script with `-I -S` (no current directory on sys.path, no PYTHON*
variables, no site-packages: faster to start) and imports only the
standard library.
"""

import os
import resource
import select
import signal
import sys
import threading
import time


def parse(argv):
    """(fd, grace, account or None, start_at or None, command) from the
    argument list."""
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    fd, grace = int(options[0]), float(options[1])
    account = start_at = None
    rest = options[2:]
    while rest:
        if rest[0] == "--user":
            uid, gid, groups = rest[1:4]
            account = (int(uid), int(gid), [int(g) for g in groups.split(",") if g])
            rest = rest[4:]
        elif rest[0] == "--start-at":
            start_at, rest = float(rest[1]), rest[2:]
        else:
            raise SystemExit(f"croniq-runner supervisor: unknown option {rest[0]}")
    return fd, grace, account, start_at, command


def wait_for_start(start_at, fd):
    """Sleep until the monotonic clock reaches `start_at`, watching the
    agent's pipe: end-of-file (the agent is gone) exits, nothing started."""
    while (left := start_at - time.monotonic()) > 0:
        readable, _, _ = select.select([fd], [], [], left)
        if readable and not os.read(fd, 1):
            os._exit(1)


def executable(name):
    """The path of program `name`, looked up in PATH."""
    if os.sep in name:
        return name
    for directory in os.get_exec_path():
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK):
            return path
    return name  # execv reports it missing


def start(command, account, fd):
    """Fork and exec COMMAND; in the child, as `account` when given. The
    program is looked up first: once the child is another user, Python's
    own library may be out of its reach, so it imports nothing more."""
    path = executable(command[0])
    pid = os.fork()
    if pid:
        return pid
    try:
        os.close(fd)
        if account is not None:
            uid, gid, groups = account
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)
        os.execv(path, command)
    except OSError as error:
        os.write(2, f"croniq-runner: cannot start the job: {error}\n".encode())
    os._exit(127)


def watch_agent(fd, grace, agent_gone):
    """Block until the agent's end of the pipe closes, then end the group."""
    try:
        while os.read(fd, 1):
            pass  # the agent never writes; only end-of-file matters
    except OSError:
        pass
    agent_gone.set()
    os.killpg(0, signal.SIGTERM)  # ignored by this process only
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and others_in_group():
        time.sleep(0.05)
    os.killpg(0, signal.SIGKILL)  # whatever is left, this process included


def others_in_group():
    """Whether a live process other than this one is in its group (always
    assumed without /proc, so the grace is waited out)."""
    if not os.path.isdir("/proc"):
        return True
    me, group = os.getpid(), os.getpgid(0)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if fields[0] != "Z" and int(fields[2]) == group:
            return True
    return False


def end_like(status):
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


def main(argv):
    fd, grace, account, start_at, command = parse(argv)
    if start_at is not None:
        wait_for_start(start_at, fd)
    child = start(command, account, fd)
    # The agent signals the whole group; the job decides how to answer,
    # this process only passes the job's status on.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    agent_gone = threading.Event()
    threading.Thread(target=watch_agent, args=(fd, grace, agent_gone), daemon=True).start()
    _, status = os.waitpid(child, 0)
    if agent_gone.is_set():
        # Leftovers get the rest of the grace; the watcher ends them all.
        threading.Event().wait()
    end_like(status)


if __name__ == "__main__":
    main(sys.argv[1:])
