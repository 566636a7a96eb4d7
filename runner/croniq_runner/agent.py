"""croniq-runner: the reference runner agent (docs/design.md §4 and §5).

Imports only the standard library and requests, so it runs on any machine
with Python. Threads:

- the poller long-polls for work while there is free capacity;
- the heartbeat thread renews the leases of held executions every
  `heartbeat_interval` and kills those the server reports lost or cancelled;
- the watchdog enforces job timeouts, SIGKILL escalation and self-fencing:
  a job whose lease could not be renewed in time is killed before the server
  can hand it to another runner. Its lease is never renewed again, and its
  end is reported only once the server must have reaped it, so the server
  settles it lost and retries it (the server then answers 409, as expected);
- each execution has a reader, a log shipper and a thread that reports its end,
  through the reports thread, which sends the reports that queue together (an
  http job's request thread takes the reader's place: http_job.py; a
  container job's process is its engine's `run`: container_job.py).

This module holds the Agent's lifecycle (start, drain, shutdown), the poller
and main(); registration.py its session with the server, leases.py the
heartbeat and the watchdog, job.py one execution. Exit codes: exits.py.
"""

import logging
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from croniq_runner import discover, wrap
from croniq_runner.cgroups import Cgroups
from croniq_runner.client import (
    Client,
    Conflict,
    Link,
    NotFound,
    Rejected,
    ServerError,
    Transient,
    Unauthorized,
)
from croniq_runner.config import (
    Config,
    SetupError,
    UsageError,
    build_parser,
    forget_token,
    parse_args,
)
from croniq_runner.container_job import ContainerJob
from croniq_runner.engine import Engine, EngineMissing, detect
from croniq_runner.exits import EXIT_OK, EXIT_SUPERSEDED, EXIT_UNAUTHORIZED, EXIT_USAGE, Fatal
from croniq_runner.http_job import HttpJob
from croniq_runner.job import Assignment, Job
from croniq_runner.leases import LeaseKeeping
from croniq_runner.ledger import Ledger, UnsafeStateDir
from croniq_runner.registration import REFRESH_INTERVAL, Registration
from croniq_runner.reports import Reports
from croniq_runner.timing import Backoff, LeaseBook, wait_for_stop

log = logging.getLogger("croniq.runner")

# After the drain, reports of killed jobs get this long to reach the server.
REPORT_WINDOW = 15.0
# The longest wait for an instant an answer may ask (`starts_in`).
MAX_STARTS_IN = 60.0
# `starts_in` counts from when the server wrote its answer, so a run waiting
# on it alone starts late by the answer's way here (a millisecond or a few).
# The instant itself (`starts_at`) read on this machine's clock is trusted
# instead when it falls at most this much before: further off (or after),
# the two machines' clocks disagree, and `starts_in` decides, as with a
# server that sends no `starts_at`.
MAX_TRANSIT = 0.05
# After a drain that let runs end, how long the long-poll still in flight
# gets to bring back what the server claimed for the slots they freed.
POLL_LANDING = 2.0


class Changes:
    """Wakes every thread waiting on the agent's state; unlike an Event, no
    waiter can swallow the wake-up meant for another."""

    def __init__(self) -> None:
        self._condition = threading.Condition()

    def notify(self) -> None:
        with self._condition:
            self._condition.notify_all()

    def wait(self, timeout: float | None) -> None:
        with self._condition:
            self._condition.wait(timeout)


class Agent(Registration, LeaseKeeping):
    def __init__(self, config: Config, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self.session = uuid.uuid4().hex
        self.link = Link(config.server, clock=clock)
        self.client = Client(config.server, config.token, self.link)
        self.runner_id: int | None = None
        self.heartbeat_interval = 10.0
        self.lease_ttl = 30.0
        self.leases: LeaseBook | None = None
        self.ledger: Ledger | None = None
        self.cgroups: Cgroups | None = None  # where jobs' limits are held (limits.py)
        self.engine: Engine | None = None  # found at start (--engine)

        self.jobs: dict[int, Job] = {}
        self.jobs_lock = threading.Lock()
        self.taken = 0  # executions accepted since start (for --once)
        self.polling = False  # a long-poll is in flight
        self.stopping_answers = 0  # poll answers in a row saying the server is stopping
        self.poll_done = threading.Event()  # set when no poll is in flight or handled
        self.poll_done.set()
        self.last_beat_sent: float | None = None  # monotonic; answered or not
        self.outages_seen = 0
        self.refresh_at = clock() + REFRESH_INTERVAL
        self.stopping = threading.Event()  # no more polling
        self.hurry = threading.Event()  # skip what is left of the drain
        self.giving_up = threading.Event()  # stop retrying reports; exiting
        self.exited = threading.Event()
        self.changed = Changes()  # a job ended, or stop: wake waiters
        self.beat_now = threading.Event()
        self.watch_now = threading.Event()  # a job arrived, or exit: wake the watchdog
        self.fatal: Fatal | None = None
        self.reports = Reports(self.client, self.session, self.giving_up, self.unauthorized)

    # -- lifecycle --------------------------------------------------------

    def run(self) -> int:
        try:
            self.open_ledger()
            self.find_engine()
            self.find_cgroups()
            self.register()
        except Fatal as fatal:
            log.error("%s", fatal)
            return fatal.code
        if self.runner_id is None:  # stopped before the server answered
            return EXIT_OK
        self.leases = LeaseBook(self.lease_ttl, clock=self.clock)
        self.reports.start()
        for target, name in (
            (self.heartbeat_loop, "heartbeat"),
            (self.watchdog_loop, "watchdog"),
            (self.poll_loop, "poll"),
        ):
            threading.Thread(target=target, name=name, daemon=True).start()
        wait_for_stop(self.stopping)
        return self.shut_down()

    def open_ledger(self) -> None:
        """End the jobs a previous run under this state directory left
        running (it was killed), then record this run's own."""
        ledger = Ledger(self.config.state_dir)
        try:
            ended = ledger.open()
        except UnsafeStateDir as error:
            # Given or the default: either way someone else could plant work there.
            raise Fatal(EXIT_USAGE, str(error)) from None
        except OSError as error:
            message = f"cannot keep the ledger of jobs in {self.config.state_dir}: {error}"
            if self.config.state_dir_given:
                raise Fatal(EXIT_USAGE, message) from None
            log.warning(
                "%s; jobs still die with this agent, but a restart after a kill cannot "
                "end what it left (set --state-dir)",
                message,
            )
            return
        self.ledger = ledger
        if ended:
            log.warning("ended %d job(s) left running by a previous run", len(ended))

    def find_engine(self) -> None:
        """The container engine --engine names, or the first that answers
        (auto); none: container jobs go to other runners."""
        try:
            self.engine = detect(self.config.engine)
        except EngineMissing as error:
            raise Fatal(EXIT_USAGE, str(error)) from None

    def find_cgroups(self) -> None:
        """Where jobs' memory limits and CPU counts go (cgroups.py), said
        once in the log; nowhere with --cgroups off."""
        if not self.config.cgroups:
            log.info("limits: no cgroups (--cgroups off): setrlimit per process, CPU from /proc")
            return
        self.cgroups = Cgroups.probe()
        log.info("limits: %s", self.cgroups.describe())

    def stop(self, why: str) -> None:
        if self.stopping.is_set():
            if not self.hurry.is_set():
                log.warning("%s again: killing running jobs now", why)
                self.hurry.set()
                self.changed.notify()
            return
        log.info("%s: no new work; draining", why)
        self.stopping.set()
        self.changed.notify()

    def die(self, code: int, message: str) -> None:
        """Give up this identity: kill jobs at once (they may already run
        elsewhere) and exit non-zero."""
        if self.fatal is None:
            self.fatal = Fatal(code, message)
            log.error("%s", message)
        self.hurry.set()
        self.stopping.set()
        self.changed.notify()

    def unauthorized(self, error: Exception) -> None:
        self.die(
            EXIT_UNAUTHORIZED,
            f"the server refused the runner token ({error}); check --token / CRONIQ_TOKEN",
        )

    def superseded(self, error: Exception) -> None:
        self.die(
            EXIT_SUPERSEDED,
            f"another process took over runner {self.config.name!r} ({error}); "
            "this one stops instead of fighting for the name",
        )

    def shut_down(self) -> int:
        running = self.busy()
        if self.fatal is None and running:
            log.info(
                "waiting up to %ss for %d running execution(s)",
                self.config.drain_timeout,
                len(running),
            )
            deadline = self.clock() + self.config.drain_timeout
            self.wait_for_jobs(deadline, self.hurry)
        reason = "superseded" if self.fatal and self.fatal.code == EXIT_SUPERSEDED else "shutdown"
        for job in self.held():
            job.kill(reason, 0 if self.fatal else self.config.kill_grace)
        window = 3.0 if self.fatal else self.config.kill_grace + REPORT_WINDOW
        if not self.wait_for_jobs(self.clock() + window):
            log.error("exiting with %d execution(s) not reported", len(self.busy()))
        lapsing = [job for job in self.held() if job.waiting_for_lapse]
        if lapsing:
            log.info(
                "leaving %d fenced execution(s) unreported: the server reaps and retries them",
                len(lapsing),
            )
        if running and self.fatal is None:
            self.let_poll_land()
        self.giving_up.set()
        self.exited.set()
        self.watch_now.set()
        if self.ledger is not None and not any(job.running for job in self.held()):
            self.ledger.close()  # nothing left for the next start to end
        if self.polling:
            # Exiting closes the poll's connection: the server hands back
            # what it claims for it and has not answered yet.
            log.info("exiting with a long-poll in flight")
        if self.fatal is not None:
            return self.fatal.code
        log.info("stopped")
        return EXIT_OK

    def let_poll_land(self) -> None:
        """A run that ends frees a slot, and the server fills it for the
        long-poll in flight (`slots`) as soon as the run's report lands: the
        answer is on its way as the drain ends. Exiting now would drop it
        unread, and its work would wait out its lease. Give the poll a moment
        to come back: what it brings is handed back (`accept`)."""
        self.poll_done.wait(POLL_LANDING)

    def wait_for_jobs(self, deadline: float, interrupt: threading.Event | None = None) -> bool:
        while self.busy():
            remaining = deadline - self.clock()
            if remaining <= 0 or (interrupt is not None and interrupt.is_set()):
                return False
            self.changed.wait(min(remaining, 0.5))
        return True

    def held(self) -> list[Job]:
        with self.jobs_lock:
            return list(self.jobs.values())

    def busy(self) -> list[Job]:
        """Held executions still running or reporting; not the fenced ones
        that only wait for their lease to lapse on the server."""
        return [job for job in self.held() if not job.waiting_for_lapse]

    # -- poll -------------------------------------------------------------

    def free_slots(self) -> int:
        if self.config.once:
            return 1 - self.taken
        return self.config.capacity - len(self.busy())

    def poll_loop(self) -> None:
        backoff = Backoff()
        while not self.stopping.is_set():
            self.poll_done.clear()
            try:
                pause = self.poll_once(backoff)
            except Exception:
                log.exception("unexpected error while polling; retrying")
                pause = backoff.next_delay()
            finally:
                self.poll_done.set()  # and what it brought is started or handed back
            if pause:
                self.stopping.wait(pause)

    def poll_once(self, backoff: Backoff) -> float:
        """One long-poll; returns how long to pause before the next one."""
        free = self.free_slots()
        if free <= 0:
            self.changed.wait(1.0)
            return 0
        path = f"/api/v1/runners/{self.runner_id}/poll"
        # `early`: work claimed ahead of its instant arrives at once, with
        # `starts_in`; the job's supervisor starts meanwhile and runs the
        # command at the instant (a server that predates it answers at the
        # instant, starts_in absent).
        body: dict[str, Any] = {
            "session": self.session,
            "wait": self.config.poll_wait,
            "capacity": free,
            "early": True,
        }
        if not self.config.once:
            # A run that ends while this poll waits frees a slot the server
            # may fill at once (a server that predates `slots` ignores it).
            body["slots"] = self.config.capacity
        self.polling = True
        # From here the poll goes out even if a stop comes now: its answer is
        # read and what it brings is handed back (`accept`).
        log.debug("polling for %d free slot(s)", free)
        try:
            answer = self.client.post(path, body, timeout=self.config.poll_wait + 10)
        except Transient:
            return backoff.next_delay()
        except Unauthorized as error:
            self.unauthorized(error)
            return 0
        except Conflict as error:
            self.superseded(error)
            return 0
        except NotFound as error:
            self.reregister(error)
            return 0
        except Rejected as error:
            log.error("poll refused (%s); retrying", error)
            return backoff.next_delay()
        finally:
            self.polling = False
        # Both clocks read once: every run of the answer waits from its
        # arrival, not from when the runs before it had started.
        arrived = Arrival.now()
        server_stopping = answer.get("stopping") is True
        pause = self.server_stopping(backoff) if server_stopping else self.answered(backoff)
        received_at = self.clock()
        for assignment in answer.get("executions") or []:
            self.accept(assignment, received_at, arrived)
        if self.config.once and not (server_stopping and not self.taken):
            if not self.taken:
                log.info("--once: no work was waiting")
            self.run_once_then_stop()
        return pause

    def answered(self, backoff: Backoff) -> float:
        self.stopping_answers = 0
        backoff.reset()
        return 0.0

    def server_stopping(self, backoff: Backoff) -> float:
        """The server answered at once because it is stopping (`stopping`,
        docs/design.md §4): poll again at once, without backoff; a balancer
        sends the new connection to a server that stays, and a restarted
        server answers it. A second such answer in a row comes from the same
        stopping server (no balancer in front, or one still sending to it):
        back off as from a server that cannot be reached, instead of asking
        it again in a tight loop until it has gone."""
        self.stopping_answers += 1
        if self.stopping_answers > 1:
            return backoff.next_delay()
        log.info("the server is stopping: polling again at once")
        backoff.reset()
        return 0.0

    def run_once_then_stop(self) -> None:
        while self.held() and not self.stopping.is_set():
            self.changed.wait(0.5)
        if not self.stopping.is_set():
            self.stopping.set()
            self.changed.notify()

    def hand_back(self, assignments: Sequence[Assignment]) -> None:
        """Give work received while stopping back to the server, unstarted:
        pending again at once for another runner, the same attempt. If the
        server cannot be told, the lease runs out and the reaper retries it."""
        held = [
            {"id": a["id"], "lease": a["lease"]} for a in assignments if "id" in a and "lease" in a
        ]
        if not held:
            return
        ids = [item["id"] for item in held]
        body = {"session": self.session, "executions": held}
        try:
            answer = self.client.post(f"/api/v1/runners/{self.runner_id}/hand-back", body)
        except ServerError as error:
            log.warning("execution(s) %s arrived while stopping; not started (%s)", ids, error)
            return
        log.info(
            "execution(s) %s arrived while stopping; handed back %s", ids, answer["handed_back"]
        )

    def accept(
        self, assignment: Assignment, received_at: float, arrived: "Arrival | None" = None
    ) -> None:
        if self.stopping.is_set():  # the poll was in flight when the stop came
            self.hand_back([assignment])
            return
        missing = [key for key in ("id", "lease", "command") if key not in assignment]
        if missing:
            # Its fields' names only: its values (`env`, `redact`) may be the
            # run's secrets, which stay out of the agent's own log.
            log.error(
                "ignoring an assignment without %s (it has %s)",
                ", ".join(missing),
                ", ".join(sorted(map(str, assignment))) or "no fields",
            )
            return
        # An http job's request is made by the agent itself (http_job.py), a
        # container job's image run by the engine (container_job.py); a kind
        # this agent cannot run, Job fails unstarted.
        kind = assignment.get("kind")
        cls: type[Job] = Job
        extra: dict[str, Any] = {}
        if kind == "http":
            cls = HttpJob
        elif kind == "container" and self.engine is not None:
            cls, extra = ContainerJob, {"engine": self.engine}
        job = cls(
            assignment,
            client=self.client,
            session=self.session,
            work_dir=self.config.work_dir,
            on_done=self.job_done,
            on_unauthorized=self.unauthorized,
            giving_up=self.giving_up,
            clock=self.clock,
            orphan_grace=self.fence_grace(),
            account=self.config.run_as,
            ledger=self.ledger,
            start_at=start_at(assignment, arrived or Arrival.now()),
            reports=self.reports,
            allowed_users=self.config.allow_run_as,
            cgroups=self.cgroups,
            **extra,
        )
        # Until the first renewal the lease counts from its arrival; the
        # immediate heartbeat below anchors it on a real renewal.
        assert self.leases is not None  # set by run() before the poller starts
        self.leases.renewed(job.id, received_at)
        with self.jobs_lock:
            self.jobs[job.id] = job
            self.taken += 1
        job.start()
        self.beat_now.set()
        self.watch_now.set()

    def job_done(self, job: Job) -> None:
        with self.jobs_lock:
            self.jobs.pop(job.id, None)
        assert self.leases is not None  # jobs start only once run() has set it
        self.leases.forget(job.id)
        self.changed.notify()


class Arrival(NamedTuple):
    """When a poll's answer arrived: time.monotonic() and time.time()."""

    monotonic: float
    wall: float

    @classmethod
    def now(cls) -> "Arrival":
        """Both clocks, the wall clock read first: an instant on it turned
        into time.monotonic() is then late, never early, by the time
        between the two reads."""
        wall = time.time()
        return cls(time.monotonic(), wall)


def start_at(assignment: Assignment, arrived: Arrival) -> float | None:
    """The time.monotonic() an assignment answered ahead may start at (None:
    at once), the answer having `arrived`. A real clock, whatever the
    agent's injected one: the job's supervisor reads the same one.

    `starts_in` from the arrival, or a little earlier the instant
    `starts_at` on this machine's wall clock, when the two agree within
    MAX_TRANSIT (see there): never later than `starts_in` says. A
    malformed `starts_in` starts at once, a malformed `starts_at` is
    ignored; the server claims at most a few seconds ahead, so a longer
    wait is cut to MAX_STARTS_IN."""
    starts_in = assignment.get("starts_in")
    if not isinstance(starts_in, (int, float)) or isinstance(starts_in, bool):
        return None
    if not starts_in > 0:
        return None
    latest = arrived.monotonic + min(starts_in, MAX_STARTS_IN)
    instant = wall_instant(assignment.get("starts_at"))
    if instant is None:
        return latest
    by_clock = arrived.monotonic + (instant - arrived.wall)
    return by_clock if latest - MAX_TRANSIT <= by_clock < latest else latest


def wall_instant(value: Any) -> float | None:
    """The epoch seconds of an ISO 8601 instant with its offset, or None."""
    if not isinstance(value, str):
        return None
    try:
        instant = datetime.fromisoformat(value)
    except ValueError:
        return None
    return instant.timestamp() if instant.tzinfo is not None else None


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s croniq-runner: %(message)s",
        stream=sys.stderr,
    )
    # requests' pool chatter is noise next to the agent's own state changes.
    logging.getLogger("urllib3").setLevel(logging.WARNING)


# `croniq-runner SUBCOMMAND ...`: the agent itself takes only flags, so a
# first word naming one of these was a usage error before and cannot change
# what an old invocation (`croniq-runner --server ... --token ...`) means.
SUBCOMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "discover": discover.main,
    "wrap": wrap.main,
}


def main(argv: Sequence[str] | None = None) -> int | str | None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in SUBCOMMANDS:
        return SUBCOMMANDS[args[0]](args[1:])
    try:
        config = parse_args(args)
    except UsageError as error:
        if not isinstance(error, SetupError):
            build_parser().print_usage(sys.stderr)
        print(f"croniq-runner: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exit:  # --help, --version
        return exit.code
    forget_token()  # jobs run as the same user could read it in /proc
    configure_logging(config.log_level)
    if config.token_on_command_line:
        log.warning("--token shows in `ps` to every user of this machine: prefer --token-file")
    if config.run_as is not None:
        log.info("jobs run as %s (uid %d)", config.run_as.name, config.run_as.uid)
    if config.allow_run_as:
        log.info("a job's run_as may name %s", ", ".join(config.allow_run_as))
    agent = Agent(config)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda s, _frame: agent.stop(f"received {signal.Signals(s).name}"))
    try:
        return agent.run()
    except ServerError as error:  # a path nothing above expected
        log.error("stopping: %s", error)
        return 1


if __name__ == "__main__":
    sys.exit(main())
