"""The management API (docs/design.md §8) as the `croniq` CLI calls it: the API
key, the answers sorted into the CLI's exit codes, a short retry while the
server is unreachable, and lists followed page by page.

Standard library and requests only.
"""

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import requests

from croniq_runner import __version__

# Exit codes of `croniq` (docs/design.md §5).
EXIT_OK = 0
EXIT_REFUSED = 1  # a 4xx other than 401/403: the API's detail is printed
EXIT_USAGE = 2
EXIT_AUTH = 3  # 401 (bad key) or 403 (missing scope)
EXIT_UNREACHABLE = 4  # no connection, a timeout, a 5xx after a short retry

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 60.0
# Pauses before each retry of a call that met an unreachable server.
RETRY_DELAYS = (0.5, 1.5)
PAGE_LIMIT = 500  # the API's largest page
BAD_URL = (
    requests.exceptions.InvalidURL,
    requests.exceptions.InvalidSchema,
    requests.exceptions.MissingSchema,
)


class Failed(Exception):
    """A call that did not succeed; `code` is the exit code it means."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def detail_of(response: requests.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if detail is None:
        return (response.text or response.reason or "").strip()[:300]
    return detail if isinstance(detail, str) else json.dumps(detail)


def failure(response: requests.Response) -> Failed:
    """The Failed that a refused or failed answer means."""
    status = response.status_code
    message = f"HTTP {status}: {detail_of(response)}"
    if status in (401, 403):
        return Failed(EXIT_AUTH, message)
    if status == 429 and response.headers.get("Retry-After"):
        message += f" (retry after {response.headers['Retry-After']} s)"
    if status >= 500:
        return Failed(EXIT_UNREACHABLE, message)
    return Failed(EXIT_REFUSED, message)


class Api:
    def __init__(
        self,
        server: str,
        key: str,
        session: requests.Session | None = None,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.server = server.rstrip("/")
        self.session = session or requests.Session()
        self.session.headers.update(
            {"Authorization": f"Bearer {key}", "User-Agent": f"croniq/{__version__}"}
        )
        self.retry_delays = retry_delays
        self.sleep = sleep

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, Any] | None = None,
        data: bytes | None = None,
        content_type: str | None = None,
    ) -> Any:
        """The JSON answer of `method /api/v1/<path>`; Failed otherwise."""
        return self.exchange(method, path, body, params, data, content_type)[1]

    def exchange(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, Any] | None = None,
        data: bytes | None = None,
        content_type: str | None = None,
    ) -> tuple[int, Any]:
        """(HTTP status, JSON answer) of `method /api/v1/<path>`, for a call
        whose status says what happened (201 created, 200 replaced); Failed
        otherwise.

        A GET is retried after any unreachable moment; a call that changes
        something only when it surely changed nothing: the connection was
        never made, or the server answered 503 (its database was away)."""
        url = f"{self.server}/api/v1/{path}"
        sent: dict[str, Any] = dict(json=body, data=data, params=params)
        sent["headers"] = {"Content-Type": content_type} if content_type else {}
        for delay in (*self.retry_delays, None):
            answer, failed, again = self.attempt(method, url, sent)
            if answer is not None:
                return answer
            assert failed is not None  # attempt answers one or the other
            if delay is None or not again:
                raise failed
            self.sleep(delay)
        raise AssertionError("not reached")

    def attempt(
        self, method: str, url: str, sent: dict[str, Any]
    ) -> tuple[tuple[int, Any] | None, Failed | None, bool]:
        """((status, answer), None, _) or (None, Failed, whether to try again)."""
        timeout = (CONNECT_TIMEOUT, READ_TIMEOUT)
        try:
            response = self.session.request(method, url, timeout=timeout, **sent)
        except BAD_URL as error:
            raise Failed(EXIT_USAGE, f"cannot call {url}: {error}") from None
        except requests.ConnectionError as error:
            failed = Failed(EXIT_UNREACHABLE, f"cannot reach {self.server}: {reason(error)}")
            return None, failed, method == "GET" or never_sent(error)
        except requests.RequestException as error:
            late = isinstance(error, requests.Timeout)
            text = "did not answer in time" if late else f"answered badly: {error}"
            return None, Failed(EXIT_UNREACHABLE, f"{self.server} {text}"), method == "GET"
        if response.status_code < 400:
            return (response.status_code, answer_of(response)), None, False
        status = response.status_code
        return None, failure(response), status == 503 or (method == "GET" and status >= 500)

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: Any = None, **params: Any) -> Any:
        return self.call("POST", path, body=body, params=params or None)

    def delete(self, path: str, **params: Any) -> Any:
        return self.call("DELETE", path, params=params)

    def pages(self, path: str, limit: int | None = None, **params: Any) -> dict[str, Any]:
        """A list's items, page by page to its end, or its first `limit`
        items: {"items": [...], "next_cursor"} as one page of the API."""
        items: list[Any] = []
        cursor = None
        while True:
            size = PAGE_LIMIT if limit is None else min(PAGE_LIMIT, limit - len(items))
            page = self.get(path, limit=size, cursor=cursor, **params)
            items += page["items"]
            cursor = page.get("next_cursor")
            if not cursor or (limit is not None and len(items) >= limit):
                return {"items": items, "next_cursor": cursor}


def answer_of(response: requests.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        raise Failed(
            EXIT_UNREACHABLE, f"HTTP {response.status_code} with a body that is not JSON"
        ) from None


def never_sent(error: requests.RequestException) -> bool:
    """Whether a connection error came before the request left: nothing can
    have changed, so even a call that changes something may be sent again."""
    return isinstance(error, requests.ConnectTimeout) or NOT_CONNECTED in str(error)


# How urllib3 (under requests) says a connection was never made.
NOT_CONNECTED = "Failed to establish a new connection"


def reason(error: requests.RequestException) -> str:
    """A short cause of a connection error: "Connection refused"."""
    text = str(error)
    if NOT_CONNECTED in text:
        return text.rsplit(NOT_CONNECTED, 1)[1].lstrip(": [").split("] ")[-1].strip("')\"")
    return text[:300]
