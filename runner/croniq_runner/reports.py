"""The agent's finish reports, sent together when they queue up.

A run's outcome leaves for the server as soon as the run ends, one call at
a time. While one call is on its way, the reports of runs that end
meanwhile queue, and go together in the next call (`POST
/api/v1/runners/{id}/finish`); a lone report goes as the single finish.
Nothing waits for a timer, and runs that end together cost one request,
not one each. A server that does not list `finish-many` in its
registration answer (an older one) gets each report on its own, from its
job's thread, as before.

Standard library and requests only.
"""

import logging
import threading
from collections.abc import Callable
from typing import Any

from croniq_runner.client import (
    Client,
    Conflict,
    NotFound,
    Rejected,
    ServerError,
    Transient,
    Unauthorized,
    refusal,
)
from croniq_runner.timing import Backoff

log = logging.getLogger("croniq.runner")

FEATURE = "finish-many"
# Reports in one call at most (the server takes up to 1,000).
MAX_REPORTS = 100
TIMEOUT = 10.0


class Report:
    """One run's outcome, waiting for its answer."""

    def __init__(self, execution_id: int, body: dict[str, Any]) -> None:
        self.execution_id = execution_id
        self.body = body
        self.answered = threading.Event()
        self.answer: Any = None  # the server's {"state": ...}; None when the agent gave up
        self.error: ServerError | None = None  # the ServerError refusing this report
        self.alone = False  # to be sent on its own instead

    def item(self) -> dict[str, Any]:
        """The report as one entry of the batch call."""
        item = {key: value for key, value in self.body.items() if key != "session"}
        item["id"] = self.execution_id
        return item

    def settle(
        self, answer: Any = None, error: ServerError | None = None, alone: bool = False
    ) -> None:
        self.answer, self.error, self.alone = answer, error, alone
        self.answered.set()


class Reports:
    """The queue of finish reports and the thread that sends them."""

    def __init__(
        self,
        client: Client,
        session: str,
        giving_up: threading.Event,
        on_unauthorized: Callable[[Exception], None],
    ) -> None:
        self.client = client
        self.session = session
        self.giving_up = giving_up
        self.on_unauthorized = on_unauthorized
        self.runner_id: int | None = None
        self.many = False  # the server answers the batch call
        self._queue: list[Report] = []
        self._changed = threading.Condition()

    def serve(self, runner_id: int, features: Any) -> None:
        """Adopt a registration answer: the runner's id, and whether its
        server lists the batch call."""
        self.runner_id = runner_id
        self.many = isinstance(features, list) and FEATURE in features

    def start(self) -> None:
        threading.Thread(target=self._send_loop, name="reports", daemon=True).start()

    def finish(self, execution_id: int, body: dict[str, Any], alone: Callable[[], Any]) -> Any:
        """The server's answer to one run's report, or None when the agent
        gave up on the server. `alone()` sends it on its own (the single
        finish call, in the caller's thread). Raises the ServerError that
        refuses this report (Conflict, NotFound, Rejected)."""
        if not self.many:
            return alone()
        report = Report(execution_id, body)
        with self._changed:
            self._queue.append(report)
            self._changed.notify()
        report.answered.wait()
        if report.alone:
            return alone()
        if report.error is not None:
            raise report.error
        return report.answer

    def _send_loop(self) -> None:
        while True:
            with self._changed:
                while not self._queue:
                    self._changed.wait()
                batch = self._queue[:MAX_REPORTS]
                del self._queue[:MAX_REPORTS]
            try:
                self._send(batch)
            except Exception:
                log.exception("reporting %d run(s) together failed; sending each alone", len(batch))
            for report in batch:
                if not report.answered.is_set():
                    report.settle(alone=True)

    def _send(self, batch: list[Report]) -> None:
        if not self.many:  # the server changed since the reports queued
            for report in batch:
                report.settle(alone=True)
            return
        if len(batch) == 1:
            self._send_alone(batch[0])
            return
        body = {"session": self.session, "executions": [report.item() for report in batch]}
        answer = self._post(f"/api/v1/runners/{self.runner_id}/finish", body)
        if answer is None:
            for report in batch:
                report.settle()
            return
        if isinstance(answer, ServerError):
            # An older server behind the same address (404 for the call), or
            # a batch it will not take as a whole (413, 422): each report
            # goes on its own and gets its own answer.
            log.info("the server refused reports sent together (%s); sending each alone", answer)
            if isinstance(answer, NotFound):
                self.many = False  # until the next registration says otherwise
            for report in batch:
                report.settle(alone=True)
            return
        log.debug("reported %d run(s) in one call", len(batch))
        answers: dict[Any, list[dict[str, Any]]] = {}
        for entry in answer.get("executions") or ():
            if isinstance(entry, dict):
                answers.setdefault(entry.get("id"), []).append(entry)
        for report in batch:
            entries = answers.get(report.execution_id)
            if not entries:
                report.settle(alone=True)
                continue
            self._answer(report, entries.pop(0))

    def _send_alone(self, report: Report) -> None:
        """A lone report goes as the single finish, from this thread: the
        server settles one run for less that way, and the reports that
        queue meanwhile still wait for it and go together."""
        answer = self._post(f"/api/v1/executions/{report.execution_id}/finish", report.body)
        if isinstance(answer, ServerError):
            report.settle(error=answer)
            return
        if answer is not None:
            log.debug("reported 1 run(s) in one call")
        report.settle(answer=answer)

    def _answer(self, report: Report, entry: dict[str, Any]) -> None:
        status: Any = entry.get("status")
        if status == 200:
            report.settle(answer={"state": entry.get("state")})
            return
        known = isinstance(status, int) and 400 <= status < 600
        error = refusal(status, entry.get("detail")) if known else None
        if isinstance(error, (Conflict, NotFound, Rejected)):
            report.settle(error=error)
        elif isinstance(error, Unauthorized):
            self.on_unauthorized(error)
            report.settle()
        else:  # not an answer this agent knows: the single call will say
            report.settle(alone=True)

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        """The answer; a ServerError that refuses the call as a whole; None
        when the agent gives up (exiting with the server unreachable, or an
        unauthorized token)."""
        backoff = Backoff()
        while True:
            try:
                return self.client.post(path, body, timeout=TIMEOUT)
            except Transient:
                if self.giving_up.wait(backoff.next_delay()):
                    log.error("giving up on reporting to the server")
                    return None
            except Unauthorized as error:
                self.on_unauthorized(error)
                return None
            except ServerError as error:
                return error
