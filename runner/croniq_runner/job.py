"""One execution on the agent: a `sh -c` child in its own process group under
a supervisor that ends the group if the agent dies (supervisor.py), and on
Linux every process below it too, one that left the group included; its
output shipped to the server in batches, its outcome reported with `finish`.

Standard library and requests only.
"""

import contextlib
import logging
import os
import pwd
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import IO, TYPE_CHECKING, Any

from croniq_runner.client import Client, Conflict, NotFound, Rejected, Transient, Unauthorized
from croniq_runner.config import VERSION, Account
from croniq_runner.limits import Held, Limits, LimitsError
from croniq_runner.logs import LogBatcher
from croniq_runner.output_cap import OutputCap
from croniq_runner.redaction import redactor_for
from croniq_runner.supervisor import kill_all, terminate
from croniq_runner.timing import Backoff

if TYPE_CHECKING:
    from croniq_runner.cgroups import Cgroups
    from croniq_runner.ledger import Ledger
    from croniq_runner.reports import Reports

# One execution as the server's poll answer hands it over (docs/design.md §4).
Assignment = dict[str, Any]
# The assignment fields this agent acts on. Announced at registration
# (`announced_features`): the server hands a job that sets one only to
# agents that announced it. `http`: the kind http and its request
# (http_job.py); `container`: the kind container and its image
# (container_job.py), announced only when a container engine answered;
# `limits`: max_output with on_max_output, max_memory and max_cpu_seconds
# (limits.py).
FEATURES = ("stdin", "run_as", "http", "container", "limits")

log = logging.getLogger("croniq.runner")

# After the supervisor exits, what is left in the job's process group gets
# this long to close the output pipe after SIGTERM before SIGKILL. On Linux
# the supervisor has ended all the shell left already (supervisor.py).
LEFTOVER_GRACE = 2.0
LOGS_TIMEOUT = 10.0
FINISH_TIMEOUT = 10.0
# Never handed to jobs: a job must not be able to act as the runner.
SECRET_ENV = ("CRONIQ_TOKEN", "CRONIQ_TOKEN_FILE")
# A W3C traceparent (version, trace id, parent id, flags), as the server
# sends a run's (docs/design.md §15); "ff" is no version.
TRACEPARENT = re.compile(r"(?!ff)[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
# The trace context variables a job would inherit from the agent's own
# environment: not its run's, so they go when the run has one.
TRACE_ENV = ("TRACEPARENT", "TRACESTATE")
SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "supervisor.py")
# How long a job gets between SIGTERM and SIGKILL when its agent died.
ORPHAN_GRACE = 5.0

REASONS = {
    "timeout": "timed out after {timeout}s",
    "cancel": "cancelled on the server's request",
    "lost": "killed: the server reported the lease lost",
    "fenced": "killed by the runner: its lease could not be renewed (server unreachable)",
    "shutdown": "killed: the runner shut down before the job ended",
    "superseded": "killed: another process took over this runner's identity",
    "limit": "killed: past its limit",
}


def traceparent_of(assignment: Assignment) -> str | None:
    """The run's trace context, or None: a server that predates it sends
    none, and a value that is not one is ignored."""
    value = assignment.get("traceparent")
    if isinstance(value, str) and TRACEPARENT.fullmatch(value):
        return value
    return None


def job_environment(
    assignment: Assignment, base: Mapping[str, str], account: "Account | None" = None
) -> dict[str, str]:
    traceparent = traceparent_of(assignment)
    dropped = SECRET_ENV + (TRACE_ENV if traceparent else ())
    env = {k: v for k, v in base.items() if k not in dropped}
    if account is not None:
        env.update(HOME=account.home, USER=account.name, LOGNAME=account.name)
    if traceparent:
        # The run's trace, with no TRACESTATE: the server keeps no vendor
        # state. A job's own env naming them wins (set just below).
        env["TRACEPARENT"] = traceparent
    env.update({str(k): str(v) for k, v in (assignment.get("env") or {}).items()})
    env.update(run_variables(assignment))
    return env


def run_variables(assignment: Assignment) -> dict[str, str]:
    """The CRONIQ_* variables a run's program gets over its env."""
    variables = {
        "CRONIQ_JOB": str(assignment.get("job", "")),
        "CRONIQ_EXECUTION_ID": str(assignment["id"]),
        "CRONIQ_SCHEDULED_FOR": str(assignment.get("scheduled_for", "")),
        "CRONIQ_ATTEMPT": str(assignment.get("attempt", "")),
    }
    # How the run came about (schedule, manual, webhook, ...); a server that
    # predates it sends none, and the job then gets none.
    trigger = assignment.get("trigger")
    if isinstance(trigger, str) and trigger:
        variables["CRONIQ_TRIGGER"] = trigger
    return variables


def outcome(
    returncode: int | None,
    kill_reason: str | None = None,
    timeout: float | None = None,
    start_error: str | None = None,
) -> dict[str, Any]:
    """The `finish` fields for how the child ended."""
    if start_error is not None:
        return {"exit_code": None, "error": f"could not start: {start_error}"}
    assert returncode is not None  # started, so it ended with a return code
    body: dict[str, Any] = {"exit_code": returncode if returncode >= 0 else None}
    parts = []
    if kill_reason:
        parts.append(REASONS[kill_reason].format(timeout=timeout))
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        parts.append(f"terminated by {name}")
    if parts:
        body["error"] = "; ".join(parts)
    if kill_reason == "timeout":
        body["timed_out"] = True
    return body


class StartRefused(Exception):
    """The run cannot start as its assignment says; it ends unstarted, this
    its reason."""


class RunAsError(StartRefused):
    """The agent cannot run the job as its `run_as` user."""


def announced_features(allowed_users: Collection[str], engine: bool = False) -> list[str]:
    """The features to announce at registration: stdin and http always,
    run_as only when --allow-run-as names a user, container only with a
    container `engine`. An agent allowing none would fail every run_as
    job, one without an engine every container job, so the server keeps
    them for agents that may run them (and says why they wait)."""
    lacking = {"run_as": not allowed_users, "container": not engine}
    return [f for f in FEATURES if not lacking.get(f, False)]


def job_account(
    assignment: Assignment, default: "Account | None", allowed_users: Collection[str]
) -> "Account | None":
    """The account to run `assignment` as: without `run_as`, the agent's
    --run-as (`default`); with it, that user if the machine's operator
    allowed it (--allow-run-as, `allowed_users`), never a fallback.
    Whoever writes jobs must not choose a user the operator did not: an
    agent run as root with --run-as nobody runs nothing as root unless root
    is allowed. The agent's own user needs no switch; any other needs the
    agent to be root. RunAsError naming the problem otherwise: never the
    wrong user."""
    name = assignment.get("run_as") or ""
    if not name:
        return default
    if not isinstance(name, str):
        raise RunAsError(f"run_as: {name!r} is not a user name")
    if name not in allowed_users:
        raise RunAsError(
            f"run_as: user {name!r} is not allowed on this runner (croniq-runner --allow-run-as)"
        )
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise RunAsError(f"run_as: no such user {name!r} on this machine") from None
    if entry.pw_uid == os.geteuid() and os.geteuid() != 0:
        return None  # the agent's own user: nothing to switch
    if os.geteuid() != 0:
        raise RunAsError(
            f"run_as: running jobs as {name!r} needs the agent to run as root "
            f"(it runs as uid {os.geteuid()})"
        )
    groups = os.getgrouplist(entry.pw_name, entry.pw_gid)
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, tuple(groups), entry.pw_dir)


class Job:
    # The assignment's `kind` this class runs (docs/design.md §15).
    KIND = "shell"

    def __init__(
        self,
        assignment: Assignment,
        *,
        client: Client,
        session: str,
        work_dir: str,
        on_done: Callable[["Job"], None],
        on_unauthorized: Callable[[Exception], None],
        giving_up: threading.Event,
        clock: Callable[[], float] = time.monotonic,
        orphan_grace: float = ORPHAN_GRACE,
        account: "Account | None" = None,
        ledger: "Ledger | None" = None,
        start_at: float | None = None,
        reports: "Reports | None" = None,
        allowed_users: Collection[str] = (),
        cgroups: "Cgroups | None" = None,
    ) -> None:
        self.assignment = assignment
        # time.monotonic() before which the job's command must not start
        # (work answered ahead of its instant); None: at once.
        self.start_at = start_at
        self.id: int = assignment["id"]
        self.lease: int = assignment["lease"]
        self.timeout: float | None = assignment.get("timeout") or None
        self.client = client
        self.session = session
        self.work_dir = work_dir
        self.on_done = on_done
        self.on_unauthorized = on_unauthorized
        self.giving_up = giving_up
        self.clock = clock
        self.orphan_grace = orphan_grace
        # The agent's --run-as (config.Account) or None; the job's own
        # run_as replaces it when the job starts, if one of `allowed_users`
        # (--allow-run-as; `job_account`).
        self.account = account
        self.allowed_users = allowed_users
        self.ledger = ledger  # agent_ledger.Ledger of this agent, or None
        self.reports = reports  # reports.Reports sending finishes together, or None
        self._lifeline: int | None = None  # the agent's end of the supervisor's pipe

        self.process: subprocess.Popen[bytes] | None = None
        self.start_error: str | None = None
        self.started_at: float | None = None
        self.kill_reason: str | None = None
        self.sigkill_at: float | None = None
        self.sigkill_sent = False
        self.reaped = False
        self.stale = False
        self.state: str | None = None  # the server's answer to finish
        self.seq = 0
        self.report_after: float | None = None  # monotonic; set when the agent gives the lease up

        # Its limits (limits.py): what its log keeps, and for a command its
        # memory and CPU, held in a cgroup of `cgroups` or by setrlimit.
        self.cgroups = cgroups
        self.limits_problem: str | None = None
        try:
            self.limits = Limits.of(assignment)
        except LimitsError as error:
            self.limits, self.limits_problem = Limits(), str(error)  # it fails unstarted
        self.held: Held | None = None
        self.limit_error: str | None = None  # the limit that ended it

        self._lock = threading.Lock()
        self._output = threading.Condition()
        self._cap = OutputCap(self.limits.max_output)
        self._batcher = LogBatcher(clock=clock, cap=self._cap)
        # The run's secret values masked out of its output (`redact`); None
        # when there are none, and the output goes out as it comes.
        self._redactor = redactor_for(assignment)
        self._output_closed = False
        self._stop_reading = threading.Event()
        self.done = threading.Event()

    def __repr__(self) -> str:
        return f"<Job {self.id} lease={self.lease}>"

    # -- starting -------------------------------------------------------

    def supervised(self, lifeline: int, output: int) -> list[str]:
        """The command line of the supervisor that runs the job's program."""
        args = [sys.executable, "-I", "-S", SUPERVISOR, str(lifeline), str(self.orphan_grace)]
        args += ["--output", str(output)]
        if self.account is not None:
            groups = ",".join(str(g) for g in self.account.groups)
            args += ["--user", str(self.account.uid), str(self.account.gid), groups]
        if self.start_at is not None and self.start_at > time.monotonic():
            args += ["--start-at", f"{self.start_at:.6f}"]
        if self.held is not None:
            args += self.held.supervisor_args()
        return [*args, *self.supervisor_options(), "--", *self.program()]

    # -- what runs: a shell job's; a container job's in container_job.py ----

    def prepare(self) -> None:
        """Check what the run needs before it starts; StartRefused (its
        reason) ends it unstarted. A shell job: the user it runs as."""
        self.account = job_account(self.assignment, self.account, self.allowed_users)

    def program(self) -> list[str]:
        """The command the supervisor runs."""
        return ["sh", "-c", self.assignment["command"]]

    def supervisor_options(self) -> list[str]:
        return []

    def environment(self) -> dict[str, str]:
        return job_environment(self.assignment, os.environ, self.account)

    def input(self) -> str:
        """What the program reads on its standard input ("": nothing)."""
        return str(self.assignment.get("stdin") or "")

    def recorded(self) -> None:
        """Note the started run in the ledger, for a restart after the
        agent's death to end what it left."""
        if self.ledger is not None and self.process is not None:
            self.ledger.add(self.process.pid, self.id)

    def start(self) -> None:
        kind = self.assignment.get("kind", "shell")
        if kind != self.KIND:
            # Not what this class runs (an http job's request is HttpJob's,
            # a container job's image ContainerJob's, and an agent without
            # an engine has none): never run as a command, whatever
            # `command` holds.
            cannot = f"croniq-runner {VERSION} does not run {kind!r} jobs"
            if kind == "container":
                cannot = "this croniq-runner found no container engine at start (--engine)"
            self.refuse_start(f"kind: {cannot}")
            return
        if self.limits_problem is not None:
            self.refuse_start(self.limits_problem)
            return
        try:
            self.prepare()
        except StartRefused as error:
            self.refuse_start(str(error))
            return
        if self.limits.of_processes:
            self.held = Held.make(self.limits, self.cgroups, self.id)
            log.info("execution %s limits: %s", self.id, self.held.how())
        stdin = self.input()
        # The supervisor reads end-of-file from this pipe once the agent is
        # gone; only the agent holds the write end (not inherited by jobs).
        lifeline, self._lifeline = os.pipe()
        # The job's output, read here. The supervisor holds the read end
        # too and drains it once the agent is gone, so what the job writes
        # while it ends (a trap's words, the shell's "Terminated") never
        # meets a pipe without a reader: that is SIGPIPE, which kills it.
        output, output_end = os.pipe()
        try:
            self.process = subprocess.Popen(
                self.supervised(lifeline, output),
                cwd=self.work_dir,
                env=self.environment(),
                # The job's input through a pipe, as cron feeds a crontab
                # line's `%` text; else nothing to read.
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=output_end,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: kills reach every child
                pass_fds=(lifeline, output),
            )
            self._output_pipe: IO[bytes] = os.fdopen(output, "rb", buffering=0)
        except (OSError, ValueError, TypeError) as error:  # no work dir, bad command
            self.start_error = str(error)
            log.error("execution %s could not start: %s", self.id, error)
            os.close(output)
            if self.held is not None:
                self.held.close()
        finally:
            os.close(lifeline)
            os.close(output_end)
        self.recorded()
        # The timeout counts from the command's start: at the instant when
        # the supervisor waits for it.
        self.started_at = self.clock() + self.wait_for_instant()
        if self.process is not None:
            log.info(
                "execution %s started (job %s, attempt %s, pid %s)",
                self.id,
                self.assignment.get("job"),
                self.assignment.get("attempt"),
                self.process.pid,
            )
            if stdin:
                self._thread(lambda: self._feed(stdin), "stdin")
            self._thread(self._read, "read")
            self._shipper: threading.Thread | None = self._thread(self._ship, "ship")
        else:
            self._output_closed = True
            self._shipper = None
        self._thread(self._run, "run")

    def refuse_start(self, error: str) -> None:
        """End the run before it starts, `error` its reason (reported as a
        start that failed, through the usual finish)."""
        self.start_error = error
        log.error("execution %s not started: %s", self.id, error)
        self.started_at = self.clock()
        self._output_closed = True
        self._shipper = None
        self._thread(self._run, "run")

    def _feed(self, text: str) -> None:
        """Write the job's `stdin` and close it (end of input). A command
        that exits without reading it all is no error."""
        assert self.process is not None and self.process.stdin is not None
        pipe = self.process.stdin
        with contextlib.suppress(OSError):  # BrokenPipeError: it stopped reading
            pipe.write(text.encode("utf-8", "surrogateescape"))
        with contextlib.suppress(OSError):
            pipe.close()

    def wait_for_instant(self) -> float:
        """Seconds until the supervisor starts the command (0: at once)."""
        return max(0.0, self.start_at - time.monotonic()) if self.start_at is not None else 0.0

    def _thread(self, target: Callable[[], None], role: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=f"exec-{self.id}-{role}", daemon=True)
        thread.start()
        return thread

    # -- killing ----------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.process is not None and not self.reaped

    @property
    def holds_lease(self) -> bool:
        """Whether heartbeats should renew this execution's lease."""
        return self.kill_reason not in ("fenced", "lost")

    @property
    def waiting_for_lapse(self) -> bool:
        """Dead and fenced, its report held until the server let the lease go."""
        return (
            not self.running
            and self.report_after is not None
            and self.state is None
            and self.clock() < self.report_after
        )

    def give_up_lease(self, grace: float, report_after: float) -> bool:
        """Self-fencing. Kill the job, and hold its report until `report_after`
        (monotonic), when the server must have let the lease lapse: the server
        then settles the run lost and retries it. Reported under a lease the
        server still honoured, the runner's kill would pass for the job's own
        failure and the scheduled instant would never run."""
        self.report_after = report_after
        return self.kill("fenced", grace)

    def kill(self, reason: str, grace: float, error: str | None = None) -> bool:
        """SIGTERM the process group now, SIGKILL after `grace` seconds.
        `error`: the limit the run is past (reason "limit"), its error."""
        with self._lock:
            if not self.running:
                return False
            first = self.kill_reason is None
            if first:
                self.kill_reason, self.limit_error = reason, error
            deadline = self.clock() + grace
            if self.sigkill_at is None or deadline < self.sigkill_at:
                self.sigkill_at = deadline
            if first:
                self._stop(signal.SIGTERM)
        if first:
            log.warning("execution %s: %s", self.id, REASONS[reason].format(timeout=self.timeout))
        return first

    def tick(self, now: float, kill_grace: float) -> None:
        """Enforce the local timeout, the limits and the SIGKILL escalation."""
        if self.started_at is None:
            return  # not started yet
        if self.timeout and self.kill_reason is None and now >= self.started_at + self.timeout:
            self.kill("timeout", kill_grace)
        if self.kill_reason is None and self.running:
            self.enforce_limits(now, kill_grace)
        with self._lock:
            due = self.sigkill_at is not None and now >= self.sigkill_at
            if self.running and due and not self.sigkill_sent:
                self.sigkill_sent = True
                self._stop(signal.SIGKILL)

    def _stop(self, signum: signal.Signals) -> None:
        """How a kill (SIGTERM, then SIGKILL after the grace) reaches the job:
        a shell job's by `_signal` (a container job's SIGTERM goes through
        its engine instead). Called holding the lock, the job running."""
        self._signal(signum)

    def enforce_limits(self, now: float, kill_grace: float) -> None:
        """End the run past its output (with on_max_output fail), its memory
        (a process of it killed in its cgroup: the others would go on) or
        its CPU time (its processes together: each has its own setrlimit
        too)."""
        if self.limits.fail_on_output and self._cap.exceeded:
            self.end_past_limit(self.limits.output_error(), kill_grace)
        elif self.held is None or self.process is None:
            return
        elif self.held.over_memory():
            self.end_past_limit(self.limits.memory_error(), kill_grace)
        elif self.held.over_cpu(now, self.process.pid):
            self.end_past_limit(self.limits.cpu_error(), kill_grace)

    def end_past_limit(self, error: str, kill_grace: float) -> None:
        """End the run, failed with `error`, unless it is already ending."""
        if self.kill("limit", kill_grace, error):
            log.warning("execution %s: %s", self.id, error)

    def _signal(self, signum: signal.Signals) -> None:
        """SIGTERM or SIGKILL the job: its process group and, on Linux, each
        process below its supervisor that left the group (`setsid`, forked
        twice): while the supervisor lives they stay below it (a subreaper,
        supervisor.py). SIGKILL reaches them first and the group, the
        supervisor with it, last, so none is orphaned beyond reach meanwhile."""
        # Only called while the group leader is not reaped, so the group id
        # cannot have been reused by an unrelated process.
        assert self.process is not None
        supervisor = self.process.pid
        if signum == signal.SIGTERM:
            terminate(supervisor, supervisor)
            return
        kill_all(supervisor)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(supervisor, signal.SIGKILL)

    # -- output -----------------------------------------------------------

    def _read(self) -> None:
        stdout = self._output_pipe
        fd = stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not self._stop_reading.is_set():
            if not poller.poll(200):
                continue
            data = os.read(fd, 65536)
            if not data:
                break
            if self._redactor is not None:
                data = self._redactor.feed(data)
            self.seen(data)
            with self._output:
                self._batcher.feed(data)
                self._output.notify_all()
        stdout.close()
        with self._output:
            if self._redactor is not None:
                held = self._redactor.finish()
                self.seen(held)
                self._batcher.feed(held)
            self._batcher.finish()
            self._output_closed = True
            self._output.notify_all()

    def seen(self, data: bytes) -> None:
        """What the program wrote, as its log gets it (masked)."""

    def _next_batch(self) -> str | None:
        with self._output:
            while True:
                batch = self._batcher.take(force=self._output_closed)
                if batch is not None or self._output_closed:
                    return batch
                self._output.wait(self._batcher.seconds_until_ready())

    def _ship(self) -> None:
        while (batch := self._next_batch()) is not None:
            self.seq += 1
            self._send_logs(self.seq, batch)

    def _send_logs(self, seq: int, data: str) -> None:
        if self.stale:
            return
        body = {"session": self.session, "lease": self.lease, "seq": seq, "data": data}
        try:
            self._retry(f"/api/v1/executions/{self.id}/logs", body, LOGS_TIMEOUT)
        except (Conflict, NotFound) as error:
            self.stale = True
            log.warning(
                "execution %s: server refused its output (%s); no more is sent", self.id, error
            )
        except Rejected as error:
            log.warning("execution %s: output batch %s refused (%s); skipped", self.id, seq, error)

    def _retry(self, path: str, body: dict[str, Any], timeout: float) -> Any:
        """Post until answered; Transient errors wait with backoff. None when
        the agent gives up (shutting down with the server unreachable)."""
        backoff = Backoff()
        while True:
            try:
                return self.client.post(path, body, timeout=timeout)
            except Transient:
                if self.giving_up.wait(backoff.next_delay()):
                    log.error("execution %s: giving up on reporting to the server", self.id)
                    return None
            except Unauthorized as error:
                self.on_unauthorized(error)
                return None

    # -- ending -----------------------------------------------------------

    def _wait_for_exit(self) -> None:
        assert self.process is not None
        process = self.process
        pid = process.pid
        # Wait without reaping: the zombie keeps the process group id ours
        # while leftovers are signalled.
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        with self._lock:
            self._signal(signal.SIGTERM)  # whatever the shell left behind
        with self._output:
            closed = self._output.wait_for(lambda: self._output_closed, LEFTOVER_GRACE)
        if not closed:
            with self._lock:
                self._signal(signal.SIGKILL)
            with self._output:
                closed = self._output.wait_for(lambda: self._output_closed, 1.0)
            if not closed:
                self._stop_reading.set()  # something outside the group holds the pipe
        # The run's CPU time, read while the supervisor is a zombie: its own
        # and that of every process below it, each reaped by then.
        cpu_at_end = None
        if self.held is not None and self.limits.max_cpu_seconds:
            cpu_at_end = self.held.cpu_seconds(pid)
        with self._lock:
            process.wait()
            self.reaped = True
        if self.ledger is not None:
            self.ledger.remove(process.pid)
        if self.limit_error is None and self.kill_reason is None:
            # Past a limit before the watchdog saw it, or one the kernel held.
            if self.limits.fail_on_output and self._cap.exceeded:
                self.limit_error = self.limits.output_error()
            elif self.held is not None:
                said = self._cap.recent
                self.limit_error = self.held.verdict(process.returncode, said, cpu_at_end)
        if self.held is not None:
            self.held.close()

    def _run(self) -> None:
        try:
            if self.process is not None:
                self._wait_for_exit()
                if self._shipper is not None:
                    self._shipper.join()
            self._finish()
        except Exception:
            log.exception("execution %s: unexpected error in the agent", self.id)
        finally:
            if self._lifeline is not None:
                os.close(self._lifeline)
            self.done.set()
            self.on_done(self)

    def _wait_for_lapse(self) -> bool:
        """False when the agent exits first: the report is then left out and
        the server reaps the lease on its own."""
        if self.report_after is None:
            return True
        wait = self.report_after - self.clock()
        if wait <= 0:
            return True
        log.info(
            "execution %s: reporting in %.0fs, once the server has let its lease lapse",
            self.id,
            wait,
        )
        if self.giving_up.wait(wait):
            log.info("execution %s: not reported; the server reaps its lease", self.id)
            return False
        return True

    def result(self) -> dict[str, Any]:
        """The `finish` fields of how the run ended: past a limit, the
        limit's error (its exit code then says nothing of the job)."""
        if self.limit_error is not None and self.start_error is None:
            return {"exit_code": None, "error": self.limit_error}
        returncode = self.process.returncode if self.process is not None else None
        return outcome(returncode, self.kill_reason, self.timeout, self.start_error)

    def _finish(self) -> None:
        body = self.result()
        log.info(
            "execution %s ended: exit code %s%s",
            self.id,
            body["exit_code"],
            f" ({body['error']})" if body.get("error") else "",
        )
        body.update(session=self.session, lease=self.lease)
        if not self._wait_for_lapse():
            return
        try:
            answer = self._report(body)
        except (Conflict, NotFound) as error:
            log.warning(
                "execution %s: server refused the report (%s): its lease was already taken "
                "back (expected after a lost lease or self-fencing)",
                self.id,
                error,
            )
            self.state = "refused"
            return
        except Rejected as error:
            log.error("execution %s: server rejected the report (%s)", self.id, error)
            self.state = "rejected"
            return
        if answer is not None:
            self.state = answer.get("state")
            log.info("execution %s reported: %s", self.id, self.state)

    def _report(self, body: dict[str, Any]) -> Any:
        """The server's answer to the finish report `body` (None: given up)."""

        def alone() -> Any:
            return self._retry(f"/api/v1/executions/{self.id}/finish", body, FINISH_TIMEOUT)

        if self.reports is None:
            return alone()
        return self.reports.finish(self.id, body, alone)
