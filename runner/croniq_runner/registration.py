"""The agent's session with the server (docs/design.md §4): registering under its
name, adopting the server's lease TTL and heartbeat interval, registering
again when the server forgot the runner, and refreshing the settings after
an outage.
"""

import logging
import socket
from typing import TYPE_CHECKING, Any

from croniq_runner.client import Conflict, NotFound, Rejected, Transient, Unauthorized
from croniq_runner.config import VERSION
from croniq_runner.exits import EXIT_UNAUTHORIZED, EXIT_USAGE, Fatal
from croniq_runner.job import announced_features
from croniq_runner.timing import Backoff, renewal_interval

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from croniq_runner.client import Client, Link
    from croniq_runner.config import Config
    from croniq_runner.engine import Engine
    from croniq_runner.reports import Reports
    from croniq_runner.timing import LeaseBook

log = logging.getLogger("croniq.runner")

REGISTER_TIMEOUT = 10.0
# The label a runner whose agent found a container engine carries by itself.
CONTAINER_LABEL = "container"
# Registration is repeated this often to pick up the server's current settings.
REFRESH_INTERVAL = 300.0


class Registration:
    """The register and refresh calls of the Agent (agent.py), which holds
    the state they set: runner_id, lease_ttl, heartbeat_interval."""

    if TYPE_CHECKING:  # the Agent's state and calls these methods use
        config: Config
        clock: Callable[[], float]
        session: str
        link: Link
        client: Client
        reports: Reports
        engine: Engine | None
        runner_id: int | None
        lease_ttl: float
        heartbeat_interval: float
        leases: LeaseBook | None
        outages_seen: int
        refresh_at: float
        stopping: threading.Event

        def die(self, code: int, message: str) -> None: ...

    def labels(self) -> list[str]:
        """--labels, and `container` when a container engine answered (what
        jobs may require: docs/design.md §15)."""
        labels = list(self.config.labels)
        if self.engine is not None and CONTAINER_LABEL not in labels:
            labels.append(CONTAINER_LABEL)
        return labels

    def registration(self) -> dict[str, Any]:
        return {
            "name": self.config.name,
            "labels": self.labels(),
            "session": self.session,
            "version": VERSION,
            "hostname": socket.gethostname(),
            "capacity": self.config.capacity,
            # What it acts on in an assignment (stdin; run_as only with
            # --allow-run-as, container only with an engine): older servers
            # ignore the field, and give such jobs to no one.
            "features": announced_features(self.config.allow_run_as, self.engine is not None),
        }

    def register(self) -> None:
        body = self.registration()
        backoff = Backoff()
        while not self.stopping.is_set():
            try:
                answer = self.client.post("/api/v1/runners/register", body, REGISTER_TIMEOUT)
            except Unauthorized as error:
                hint = (
                    "the name belongs to another token: pick another --name, or release it "
                    "in the admin"
                    if error.status == 403
                    else "check --token / CRONIQ_TOKEN"
                )
                raise Fatal(
                    EXIT_UNAUTHORIZED,
                    f"the server refused to register runner {self.config.name!r} ({error}); "
                    + hint,
                ) from None
            except Rejected as error:
                # Invalid labels or name: retrying cannot fix the configuration.
                raise Fatal(EXIT_USAGE, f"the server refused the registration ({error})") from None
            except (Transient, NotFound, Conflict):
                self.stopping.wait(backoff.next_delay())
                continue
            self.registered(answer)
            return

    def registered(self, answer: dict[str, Any]) -> None:
        self.runner_id = answer["runner_id"]
        self.reports.serve(self.runner_id, answer.get("features"))
        self.lease_ttl = float(answer.get("lease_ttl") or 30)
        self.heartbeat_interval = self.pace(float(answer.get("heartbeat_interval") or 10))
        log.info(
            "connected to %s as runner %r (id %s, session %s, labels %s, capacity %d)",
            self.config.server,
            self.config.name,
            self.runner_id,
            self.session,
            ",".join(self.labels()) or "-",
            self.config.capacity,
        )
        if answer.get("takeover"):
            log.warning(
                "took over runner %r from a previous session; the server released its executions",
                self.config.name,
            )

    def pace(self, asked: float) -> float:
        """The renewal interval for the server's `asked` heartbeat interval
        and the current lease TTL; a pace the leases cannot survive is
        shortened, and the log says so."""
        interval = renewal_interval(asked, self.lease_ttl)
        if interval < asked:
            log.warning(
                "the server asks for a heartbeat every %.1fs but grants %.1fs leases: "
                "renewing every %.1fs instead",
                asked,
                self.lease_ttl,
                interval,
            )
        return interval

    def reregister(self, error: Exception) -> None:
        """The server forgot this runner (deleted in the admin): register again."""
        log.warning("server does not know runner %s (%s); registering again", self.runner_id, error)
        try:
            self.register()
        except Fatal as fatal:
            self.die(fatal.code, str(fatal))

    def refresh(self) -> None:
        """After an outage, and every few minutes (web processes restarted in
        turn show no outage), the server may run with other settings:
        register again under the same session (no takeover) and adopt its
        lease TTL and heartbeat interval."""
        outages = self.link.outages
        answer = self.client.post("/api/v1/runners/register", self.registration(), REGISTER_TIMEOUT)
        self.outages_seen = outages
        self.refresh_at = self.clock() + REFRESH_INTERVAL
        self.runner_id = answer["runner_id"]
        self.reports.serve(self.runner_id, answer.get("features"))
        if answer.get("lease_ttl"):
            self.shorten_leases(float(answer["lease_ttl"]))
        interval = answer.get("heartbeat_interval")
        if interval:
            self.heartbeat_interval = min(self.heartbeat_interval, self.pace(float(interval)))

    def shorten_leases(self, ttl: float) -> None:
        """Count leases with a shorter TTL from now on (never a longer one:
        fencing early is safe, fencing late is not)."""
        assert self.leases is not None  # refreshed only once run() has set it
        if not self.leases.shorten(ttl):
            return
        self.lease_ttl = ttl
        self.heartbeat_interval = renewal_interval(self.heartbeat_interval, ttl)
        log.warning(
            "the server now grants shorter leases (%.1fs): renewing every %.1fs, "
            "fencing %.1fs after a renewal",
            ttl,
            self.heartbeat_interval,
            ttl - self.leases.margin,
        )
