"""The runner protocol over HTTP (docs/design.md §4), seen from the agent.

Every answer is sorted into what the agent does about it: retry later
(Transient), give up on this identity (Unauthorized, Conflict on the runner),
or drop one request (Rejected). Standard library and requests only.
"""

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import requests

from croniq_runner.config import VERSION

log = logging.getLogger("croniq.runner")

CONNECT_TIMEOUT = 5.0


class ServerError(Exception):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Transient(ServerError):
    """No usable answer (refused, timed out, 5xx): try again with backoff."""


class Unauthorized(ServerError):
    """401/403: the token is wrong or revoked, or the name belongs to another token."""


class Conflict(ServerError):
    """409: stale lease, or this session was superseded by another process."""


class NotFound(ServerError):
    """404: the server does not know the runner or execution."""


class Rejected(ServerError):
    """Another 4xx: this request can never succeed as it is."""


def _detail(response: requests.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, str):
        return detail
    if detail is not None:
        return json.dumps(detail)[:500]
    return (response.text or response.reason or "")[:200].strip()


def classify(response: requests.Response) -> Any:
    """The answer's JSON, or the ServerError that describes it."""
    status = response.status_code
    if 200 <= status < 300:
        try:
            return response.json()
        except ValueError:
            raise Transient(f"HTTP {status} with a body that is not JSON", status) from None
    raise refusal(status, _detail(response))


def refusal(status: int, detail: str | None) -> ServerError:
    """The ServerError for an answer of `status` (not 2xx) saying `detail`."""
    message = f"HTTP {status}: {detail}" if detail else f"HTTP {status}"
    if status in (401, 403):
        return Unauthorized(message, status)
    if status == 409:
        return Conflict(message, status)
    if status == 404:
        return NotFound(message, status)
    if status in (408, 425, 429) or status >= 500:
        return Transient(message, status)
    return Rejected(message, status)


class Link:
    """Whether the server answers, logged once per change of state."""

    def __init__(self, server: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.server = server
        self.clock = clock
        self.up: bool | None = None  # unknown until the first answer
        self.down_since: float | None = None
        self.outages = 0  # ended outages, so others can tell the server may have restarted
        self._lock = threading.Lock()

    def answered(self) -> None:
        with self._lock:
            if self.down_since is not None:
                verb = "reconnected to" if self.up is False else "reached"
                outage = self.clock() - self.down_since
                log.info("%s %s after %.1fs without it", verb, self.server, outage)
                self.outages += 1
            self.up, self.down_since = True, None

    def failed(self, reason: str) -> None:
        with self._lock:
            if self.down_since is not None:
                log.debug("server still unreachable: %s", reason)
                return
            if self.up:
                log.warning(
                    "lost connection to %s (%s); retrying with backoff", self.server, reason
                )
                self.up = False
            else:
                log.warning("cannot reach %s (%s); retrying with backoff", self.server, reason)
            self.down_since = self.clock()


class Client:
    """JSON calls with the bearer token; one requests.Session per thread."""

    def __init__(self, server: str, token: str, link: Link | None = None) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.link = link or Link(self.server)
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers.update(
                {
                    "Authorization": f"Bearer {self.token}",
                    "User-Agent": f"croniq-runner/{VERSION}",
                }
            )
            self._local.session = session
        return session

    def post(self, path: str, body: Any, timeout: float = 10.0) -> Any:
        try:
            response = self._session().post(
                self.server + path,
                data=json.dumps(body, ensure_ascii=False).encode("utf-8"),
                headers={"Content-Type": "application/json"},
                timeout=(min(CONNECT_TIMEOUT, timeout), timeout),
            )
        except requests.RequestException as error:
            # A broken pooled connection must not poison the next attempt.
            self._local.session.close()
            self._local.session = None
            reason = describe_failure(error)
            self.link.failed(reason)
            raise Transient(reason) from None
        try:
            answer = classify(response)
        except Transient as error:
            self.link.failed(str(error))
            raise
        except ServerError:
            self.link.answered()  # a refusal is still an answer: the server is back
            raise
        self.link.answered()
        return answer


def describe_failure(error: requests.RequestException) -> str:
    """A short reason for a failed call, for the one log line per outage."""
    text = str(error)
    if isinstance(error, requests.Timeout):
        return "timed out"
    if isinstance(error, requests.exceptions.SSLError):
        # Not a passing fault, but the agent still retries: the operator may
        # be fixing the certificate. The log line says what is wrong.
        return f"TLS error: {text[-200:]}"
    if isinstance(error, requests.ConnectionError):
        if "Connection refused" in text:
            return "connection refused"
        if "reset" in text.lower():
            return "connection reset"
        if "Name or service not known" in text or "NameResolutionError" in text:
            return "host name not found"
        return "connection failed"
    return type(error).__name__
