"""One http job on the agent (docs/design.md §15): the request made by the
agent itself, in a thread of the run's slot instead of a process, and its
answer (status line, headers, the body) written to the run's log through
the same batching, masking and `max_output` as a command's output: past
it the log keeps the answer's head and tail (the body is read to its end,
as the other end meant the exchange to go), or with `on_max_output: fail`
the request is abandoned and the run fails.

The run succeeds on an expected status and fails on another ("HTTP 503")
or when no answer comes ("connection refused: host:port"). Timeouts, a
cancel, a lost lease and self-fencing end it as they end a command: the
request is abandoned at once, its connection shut, and the end reported as
a command's is. Redirects are not followed: a 3xx is the answer, so a job's
headers (its credentials) never go to a host its writer did not name.

Standard library and requests only.
"""

import contextlib
import logging
import socket
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from croniq_runner.config import VERSION
from croniq_runner.job import REASONS, Job, traceparent_of
from croniq_runner.redaction import redactor_for

log = logging.getLogger("croniq.runner")

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
CHUNK = 64 * 1024
# A connection not made within this long fails the run, deadline or not.
CONNECT_TIMEOUT = 30.0
# The request's own socket timeouts run this much past the run's deadline:
# the deadline ends the run (timed out), a socket timeout only the thread.
DEADLINE_SLACK = 1.0
VERSIONS = {10: "HTTP/1.0", 11: "HTTP/1.1", 20: "HTTP/2"}


class RequestError(Exception):
    """An assignment's `http` this agent cannot send: the run fails unstarted."""


@dataclass(frozen=True)
class Request:
    """An http job's request, as its assignment's `http` gives it."""

    method: str
    url: str
    headers: dict[str, str]
    body: str
    expect_status: tuple[int, ...]
    timeout: float | None

    @classmethod
    def of(cls, http: Any) -> "Request":
        """The request of an assignment's `http`; RequestError naming the field
        (never its value: it may hold the run's secrets)."""
        if not isinstance(http, Mapping):
            raise RequestError("http: no request in the assignment")
        method = http.get("method") or "GET"
        if method not in METHODS:
            raise RequestError(f"http.method: {method!r} is not one of {', '.join(METHODS)}")
        url = http.get("url")
        if not isinstance(url, str):
            raise RequestError("http.url: missing")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise RequestError("http.url: not an http:// or https:// URL with a host")
        try:
            parts.port  # noqa: B018 (it raises on a port that is no number)
        except ValueError:
            raise RequestError("http.url: its port is not a number") from None
        return cls(
            method=method,
            url=url,
            headers=headers_of(http.get("headers")),
            body=text_of("http.body", http.get("body")),
            expect_status=statuses_of(http.get("expect_status")),
            timeout=timeout_of(http.get("timeout")),
        )

    def expects(self, status: int) -> bool:
        """Whether `status` makes the run succeed: any 2xx unless listed."""
        if self.expect_status:
            return status in self.expect_status
        return 200 <= status < 300

    @property
    def where(self) -> str:
        """host:port, as errors name the other end (never the path or query)."""
        parts = urllib.parse.urlsplit(self.url)
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        host = parts.hostname or ""
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def headers_of(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RequestError("http.headers: not a mapping of names to text")
    headers = {}
    for name, text in value.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise RequestError("http.headers: not a mapping of names to text")
        # A resolved secret may hold a line break, which would end the header
        # (and requests would quote the value in its error).
        if any(c in name + text for c in "\r\n\0"):
            raise RequestError(f"http.headers.{name}: a header's value is one line")
        if text[:1].isspace():
            raise RequestError(f"http.headers.{name}: a header's value does not start with a space")
        headers[name] = text
    return headers


def text_of(field: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RequestError(f"{field}: not text")
    return value


def statuses_of(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise RequestError("http.expect_status: not a list of status codes")
    return tuple(value)


def timeout_of(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise RequestError("http.timeout: not a number of seconds")
    return float(value)


class Connections:
    """The sockets of one run's request, so that an abandoned request is cut
    at once: shutting a socket down wakes the thread blocked reading it,
    which closing it from another thread does not. A socket connected after
    the cut is shut as it arrives."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.cut = False

    def add(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            cut = self.cut
        if cut:
            shut(sock)

    def close(self) -> None:
        with self._lock:
            self.cut = True
            sockets = list(self._sockets)
        for sock in sockets:
            shut(sock)


def shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def tracked(pool: type[Any], connections: Connections) -> type[Any]:
    """urllib3's connection pool class `pool` (read from requests' pool
    manager: the agent imports requests alone), whose connections hand each
    socket they connect to `connections`."""

    class Tracked(pool.ConnectionCls):  # type: ignore[name-defined]
        def connect(self) -> None:
            super().connect()
            connections.add(self.sock)

    return type(pool.__name__, (pool,), {"ConnectionCls": Tracked})


class TrackingAdapter(HTTPAdapter):
    """requests' adapter whose connections hand their sockets to a run's
    `Connections`. Behind a proxy (HTTP_PROXY) they are not tracked: the
    run still ends at once, and its thread when the proxy answers or its
    timeout comes."""

    def __init__(self, connections: Connections) -> None:
        self.connections = connections  # read by init_poolmanager, which __init__ calls
        super().__init__(max_retries=0)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        manager = self.poolmanager
        manager.pool_classes_by_scheme = {
            scheme: tracked(pool, self.connections)
            for scheme, pool in manager.pool_classes_by_scheme.items()
        }


class HttpJob(Job):
    """A Job whose run is an HTTP request the agent makes (kind http)."""

    KIND = "http"

    def __init__(self, assignment: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(assignment, **kwargs)
        self.request: Request | None = None
        self.status: int | None = None  # of the answer, once its headers came
        self.failure: str | None = None  # why no whole answer came
        self._begun = False
        self._ended = threading.Event()  # answered, failed or abandoned
        self._connections = Connections()

    # -- starting -------------------------------------------------------

    def start(self) -> None:
        try:
            if self.limits_problem is not None:
                raise RequestError(self.limits_problem)
            self.request = Request.of(self.assignment.get("http"))
        except RequestError as error:
            self._ended.set()
            self.refuse_start(str(error))
            return
        # The shorter of the job's timeout and the request's own.
        limits = [t for t in (self.timeout, self.request.timeout) if t]
        self.timeout = min(limits) if limits else None
        self.started_at = self.clock() + self.wait_for_instant()
        self._begun = True
        log.info(
            "execution %s started (job %s, attempt %s, %s to %s)",
            self.id,
            self.assignment.get("job"),
            self.assignment.get("attempt"),
            self.request.method,
            self.masked(self.request.where),
        )
        self._shipper = self._thread(self._ship, "ship")
        self._thread(self._exchange, "http")
        self._thread(self._run, "run")

    # -- ending early -----------------------------------------------------

    @property
    def running(self) -> bool:
        return self._begun and not self._ended.is_set()

    def kill(self, reason: str, grace: float, error: str | None = None) -> bool:
        """Abandon the request now (a request has no SIGTERM to wait out):
        its connection is shut, and the run ends with `reason` (`error`:
        the limit it is past)."""
        with self._lock:
            if not self.running:
                return False
            first = self.kill_reason is None
            if first:
                self.kill_reason, self.limit_error = reason, error
        if first:
            why = REASONS[reason].format(timeout=seconds(self.timeout))
            log.warning("execution %s: %s", self.id, why)
            self._connections.close()
            self._ended.set()
        return first

    def tick(self, now: float, kill_grace: float) -> None:
        if self.started_at is None or not self.timeout or self.kill_reason is not None:
            return
        if now >= self.started_at + self.timeout:
            self.kill("timeout", kill_grace)

    def remaining(self) -> float | None:
        """Seconds until the run times out (None: no limit)."""
        if self.timeout is None or self.started_at is None:
            return None
        return max(0.0, self.started_at + self.timeout - self.clock())

    # -- the exchange ---------------------------------------------------

    def _exchange(self) -> None:
        """Make the request and write its answer to the log; what it finds is
        dropped once the run was abandoned."""
        assert self.request is not None
        session = requests.Session()
        adapter = TrackingAdapter(self._connections)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        try:
            if self._ended.wait(self.wait_for_instant()):
                return  # cancelled before its instant
            with self.sent(session) as response:
                self.status = response.status_code
                self._emit(answer_head(response))
                self._read_body(response)
        except (requests.RequestException, OSError) as error:
            if not self._ended.is_set():
                self.failure = self.masked(failure(error, self.request))
        except Exception as error:  # a path no case above foresaw: fail the run, say so
            log.exception("execution %s: unexpected error in the request", self.id)
            if not self._ended.is_set():
                self.failure = f"the request failed in the agent: {type(error).__name__}"
        finally:
            session.close()
            self._ended.set()

    @contextlib.contextmanager
    def sent(self, session: requests.Session) -> Iterator[requests.Response]:
        assert self.request is not None
        request = self.request
        headers = dict(request.headers)
        if not any(name.lower() == "user-agent" for name in headers):
            headers["User-Agent"] = f"croniq-runner/{VERSION}"
        # The run's trace context (docs/design.md §15), unless the job sends
        # its own; no tracestate.
        traceparent = traceparent_of(self.assignment)
        if traceparent and not any(name.lower() == "traceparent" for name in headers):
            headers["traceparent"] = traceparent
        remaining = self.remaining()
        read = None if remaining is None else remaining + DEADLINE_SLACK
        connect = CONNECT_TIMEOUT if read is None else min(CONNECT_TIMEOUT, read)
        response = session.request(
            request.method,
            request.url,
            headers=headers,
            # Text as UTF-8: http.client would send a str as Latin-1.
            data=request.body.encode("utf-8", "surrogateescape") if request.body else None,
            timeout=(connect, read),
            allow_redirects=False,
            stream=True,
        )
        try:
            yield response
        finally:
            response.close()

    def _read_body(self, response: requests.Response) -> None:
        for chunk in response.iter_content(CHUNK):
            if self._ended.is_set():
                return
            self._emit(chunk)
            if self.limits.fail_on_output and self._cap.exceeded:
                self.end_past_limit(self.limits.output_error(), 0)
                return

    # -- output ---------------------------------------------------------

    def _emit(self, data: bytes) -> None:
        with self._output:
            if self._output_closed:
                return  # abandoned: the run has ended
            if self._redactor is not None:
                data = self._redactor.feed(data)
            self._batcher.feed(data)
            self._output.notify_all()

    def _close_output(self) -> None:
        with self._output:
            if self._output_closed:
                return
            if self._redactor is not None:
                self._batcher.feed(self._redactor.finish())
            self._batcher.finish()
            self._output_closed = True
            self._output.notify_all()

    def masked(self, text: str) -> str:
        """`text` with the run's secret values masked: errors and the agent's
        own log are not the run's output, yet a host or a message may hold
        one."""
        redactor = redactor_for(self.assignment)
        if redactor is None:
            return text
        data = redactor.feed(text.encode("utf-8", "surrogateescape")) + redactor.finish()
        return data.decode("utf-8", "replace")

    # -- ending -----------------------------------------------------------

    def _run(self) -> None:
        try:
            # The deadline is enforced here too: the run ends on time with
            # or without the agent's watchdog.
            while not self._ended.wait(self.remaining()):
                self.kill("timeout", 0)
            self._close_output()
            if self._shipper is not None:
                self._shipper.join()
            self._finish()
        except Exception:
            log.exception("execution %s: unexpected error in the agent", self.id)
        finally:
            self.done.set()
            self.on_done(self)

    def result(self) -> dict[str, Any]:
        if self.start_error is not None:
            return {"exit_code": None, "error": f"could not start: {self.start_error}"}
        if self.limit_error is not None:
            return {"exit_code": None, "error": self.limit_error}
        if self.kill_reason is not None:
            body: dict[str, Any] = {
                "exit_code": None,
                "error": REASONS[self.kill_reason].format(timeout=seconds(self.timeout)),
            }
            if self.kill_reason == "timeout":
                body["timed_out"] = True
            return body
        if self.failure is not None:
            return {"exit_code": None, "error": self.failure}
        assert self.request is not None and self.status is not None  # answered
        if self.request.expects(self.status):
            return {"exit_code": 0}
        return {"exit_code": None, "error": f"HTTP {self.status}"}


def answer_head(response: requests.Response) -> bytes:
    """The status line and the headers of an answer, as the log shows them."""
    raw = response.raw
    version = VERSIONS.get(getattr(raw, "version", 11), "HTTP/1.1")
    lines = [f"{version} {response.status_code} {response.reason or ''}".rstrip()]
    headers = raw.headers if raw is not None else response.headers
    pairs = headers.iteritems() if hasattr(headers, "iteritems") else headers.items()
    lines += [f"{name}: {value}" for name, value in pairs]
    return ("\n".join(lines) + "\n\n").encode("utf-8", "replace")


def failure(error: BaseException, request: Request) -> str:
    """Why no answer came, in a few words naming the other end (host:port,
    never the path or query)."""
    causes = list(chain(error))
    where = request.where
    if isinstance(error, requests.exceptions.SSLError):
        return f"TLS error with {where}: {root(causes)}"
    if isinstance(error, requests.exceptions.ConnectTimeout):
        return f"connection to {where} timed out"
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return f"connection refused: {where}"
    if any(isinstance(c, socket.gaierror) for c in causes):
        return f"cannot resolve {urllib.parse.urlsplit(request.url).hostname}: {root(causes)}"
    if isinstance(error, requests.exceptions.ReadTimeout):
        return f"no answer from {where} in time"
    if isinstance(error, (requests.exceptions.ChunkedEncodingError, ConnectionError)):
        return f"connection to {where} broken: {root(causes)}"
    return f"request to {where} failed: {root(causes)}"


def chain(error: BaseException) -> Iterator[BaseException]:
    """`error` and what caused it, through requests' and urllib3's wrappers."""
    seen: set[int] = set()
    todo: list[Any] = [error]
    while todo:
        current = todo.pop(0)
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [getattr(current, "reason", None), current.__cause__, current.__context__]
        todo += [arg for arg in current.args if isinstance(arg, BaseException)]


def root(causes: list[BaseException]) -> str:
    """The innermost cause's words: "[Errno 111] Connection refused"."""
    for cause in reversed(causes):
        text = getattr(cause, "strerror", None) or str(cause)
        if text:
            return text[:300]
    return type(causes[-1]).__name__


def seconds(timeout: float | None) -> str:
    """A timeout as the error says it: 30, not 30.0."""
    if timeout is None:
        return "?"
    return f"{timeout:g}"
