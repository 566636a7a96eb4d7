"""How the agent keeps its leases (docs/design.md §4 and §5): the heartbeat renews
those of held executions and kills the jobs the server reports lost or
cancelled; the watchdog enforces job timeouts, SIGKILL escalation and
self-fencing (a job whose lease could not be renewed in time is killed
before the server can hand it to another runner).
"""

import logging
from typing import TYPE_CHECKING

from croniq_runner.client import Conflict, NotFound, Rejected, Transient, Unauthorized
from croniq_runner.timing import Backoff

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from croniq_runner.client import Client, Link
    from croniq_runner.config import Config
    from croniq_runner.exits import Fatal
    from croniq_runner.job import Job
    from croniq_runner.timing import LeaseBook

log = logging.getLogger("croniq.runner")

WATCHDOG_TICK = 0.1
# With no job held there is nothing to fence or time out: the watchdog sleeps
# until a job arrives or the agent exits (`watch_now`), looking this often
# regardless. An idle agent then wakes once in 5 s, not 10 times a second.
WATCHDOG_REST = 5.0
# A fenced job is reported this long after its lease must have expired on the
# server, so the reaper has settled it lost (and retried it) first.
REAP_SLACK = 3.0


class LeaseKeeping:
    """The heartbeat and watchdog threads of the Agent (agent.py)."""

    if TYPE_CHECKING:  # the Agent's state and calls these methods use
        config: Config
        clock: Callable[[], float]
        session: str
        link: Link
        client: Client
        runner_id: int | None
        lease_ttl: float
        heartbeat_interval: float
        leases: LeaseBook | None
        outages_seen: int
        refresh_at: float
        last_beat_sent: float | None
        fatal: Fatal | None
        exited: threading.Event
        beat_now: threading.Event
        watch_now: threading.Event

        def held(self) -> list[Job]: ...
        def refresh(self) -> None: ...
        def reregister(self, error: Exception) -> None: ...
        def unauthorized(self, error: Exception) -> None: ...
        def superseded(self, error: Exception) -> None: ...

    def heartbeat_loop(self) -> None:
        backoff = Backoff(cap=self.heartbeat_interval)
        pause = 0.0
        while not self.exited.is_set() and self.fatal is None:
            self.beat_now.wait(pause)
            self.beat_now.clear()
            if self.exited.is_set() or self.fatal is not None:
                return
            try:
                pause = self.beat_once(backoff)
            except Exception:
                log.exception("unexpected error in the heartbeat; retrying")
                pause = backoff.next_delay()

    def beat_once(self, backoff: Backoff) -> float:
        """One heartbeat; returns the pause before the next."""
        try:
            if self.link.outages != self.outages_seen or self.clock() >= self.refresh_at:
                self.refresh()
            self.heartbeat()
        except Transient:
            # Retry sooner than the interval: the leases are running out.
            return min(backoff.next_delay(), self.heartbeat_interval)
        except Unauthorized as error:
            self.unauthorized(error)
        except Conflict as error:
            self.superseded(error)
        except NotFound as error:
            self.reregister(error)
        except Rejected as error:
            log.error("heartbeat refused (%s)", error)
        backoff.reset()
        return self.heartbeat_interval

    def heartbeat_timeout(self) -> float:
        return max(2.0, min(10.0, self.lease_ttl / 3))

    def heartbeat(self) -> None:
        # A lease given up (fenced, or reported lost) is never renewed again.
        held = [job for job in self.held() if job.holds_lease]
        body = {
            "session": self.session,
            "executions": [{"id": job.id, "lease": job.lease} for job in held],
        }
        sent_at = self.last_beat_sent = self.clock()
        path = f"/api/v1/runners/{self.runner_id}/heartbeat"
        answer = self.client.post(path, body, timeout=self.heartbeat_timeout())
        by_id = {job.id: job for job in held}
        for execution_id in answer.get("renewed") or []:
            if execution_id in by_id:
                self._leases().renewed(execution_id, sent_at)
        for execution_id in answer.get("lost") or []:
            if execution_id in by_id:
                by_id[execution_id].kill("lost", self.fence_grace())
                self._leases().forget(execution_id)
        for execution_id in answer.get("cancel") or []:
            if execution_id in by_id:
                by_id[execution_id].kill("cancel", self.config.kill_grace)

    # -- watchdog ---------------------------------------------------------

    def watchdog_loop(self) -> None:
        while not self.exited.is_set():
            self.watch_now.clear()
            if self.held():
                self.exited.wait(WATCHDOG_TICK)
            else:
                self.watch_now.wait(WATCHDOG_REST)
            if self.exited.is_set():
                return
            try:
                self.watch(self.clock())
            except Exception:
                log.exception("unexpected error in the watchdog")

    def watch(self, now: float) -> None:
        """Self-fencing, local timeouts and SIGKILL escalation, at `now`."""
        jobs = {job.id: job for job in self.held()}
        leases = self._leases()
        for execution_id in leases.overdue(now):
            job = jobs.get(execution_id)
            leases.forget(execution_id)
            if job is not None and job.running:
                job.give_up_lease(self.fence_grace(), self.lapse_time(now))
        for job in jobs.values():
            job.tick(now, self.config.kill_grace)

    def lapse_time(self, now: float) -> float:
        """When the server must have let a lease go that this agent stops
        renewing at `now`: a heartbeat still in flight may renew it once more."""
        last_renewal = now
        if self.last_beat_sent is not None:
            last_renewal = max(now, self.last_beat_sent + self.heartbeat_timeout())
        return last_renewal + self.lease_ttl + REAP_SLACK

    def fence_grace(self) -> float:
        """SIGTERM to SIGKILL delay when the lease is gone: the job must be
        dead before the server's lease runs out."""
        return min(self._leases().margin / 2, self.config.kill_grace)

    def _leases(self) -> "LeaseBook":
        """The lease book run() sets before any thread that keeps leases starts."""
        assert self.leases is not None
        return self.leases
