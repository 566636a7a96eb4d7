"""The ping endpoint at the ASGI level (docs/design.md §12): what
`checks.views.ping` answers, without Django's request and response.

A ping is a few hundred bytes in and "OK" out, a thousand a second. Through
Django's handler, even the lean path of runner calls
(croniq_project.asgi_handler), each one built a request, ran the middleware
chain, resolved the URL, built a response and waited on a second task for
a disconnect, about as much CPU as recording the ping. Here the path is
split by hand (healthchecks.io's few forms), the Host header checked against
ALLOWED_HOSTS as Django would, and the answer sent with the headers
Django's middleware gives a plain-text answer. With the ASGI handler
switched back to Django's (CRONIQ_STOCK_DJANGO naming `asgi_handler`),
pings go through the view instead; both answer through `views.answer`.

A database that fails (down, failing over) is answered 503 with a line in
the log: a ping's sender (`curl -fsS --retry 3`, `croniq-runner wrap`) tries
again, where a 500 page would tell it nothing.
"""

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestAborted
from django.db import DatabaseError
from django.http.request import split_domain_port, validate_host

from checks import views
from checks.models import MAX_BODY
from core.request_bodies import read_capped_body

log = logging.getLogger(__name__)

PREFIX = "/ping/"
ACTIONS = frozenset({"start", "fail", "log"})
NOT_FOUND = views.Answer(404, "not found")


def is_ping(path: str) -> bool:
    return path.startswith(PREFIX)


def split(path: str) -> tuple[str, str] | None:
    """(token, action) of /ping/<token>[/<action>], or None for any other
    path under /ping/ (the URL patterns of checks.urls, by hand)."""
    token, _, action = path.removeprefix(PREFIX).partition("/")
    if not token or "/" in action:
        return None
    if action and action not in ACTIONS and not action.isdigit():
        return None
    return token, action


def header(scope: dict[str, Any], name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return ""


def host_allowed(scope: dict[str, Any]) -> bool:
    """Django's Host check (HttpRequest.get_host) for this request."""
    host = header(scope, b"host")
    if not host and scope.get("server"):
        host = str(scope["server"][0])
    domain, _ = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)


def common_headers() -> list[tuple[bytes, bytes]]:
    """What Django's middleware adds to a plain-text answer, from the same
    settings (SecurityMiddleware, XFrameOptionsMiddleware)."""
    given = [(b"content-type", b"text/plain; charset=utf-8")]
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        given.append((b"x-content-type-options", b"nosniff"))
    if settings.SECURE_REFERRER_POLICY:
        given.append((b"referrer-policy", str(settings.SECURE_REFERRER_POLICY).encode()))
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        policy = settings.SECURE_CROSS_ORIGIN_OPENER_POLICY
        given.append((b"cross-origin-opener-policy", policy.encode()))
    given.append((b"x-frame-options", getattr(settings, "X_FRAME_OPTIONS", "DENY").encode()))
    return given


async def serve(scope: dict[str, Any], receive: Any, send: Any, close: bool = False) -> None:
    """Answer the ping request `scope`; `close`: the process is stopping,
    so the connection closes after the answer."""
    parts = split(scope["path"])
    if not host_allowed(scope):
        log.warning("ping refused: Host header %r not in ALLOWED_HOSTS", header(scope, b"host"))
        given = views.Answer(400, "invalid Host header")
    elif parts is None:
        given = NOT_FOUND
    else:
        token, action = parts

        async def read_body() -> bytes:
            return (await read_capped_body(receive, MAX_BODY + 1)).getvalue()

        client = scope.get("client")
        try:
            given = await views.answer(
                scope["method"],
                token,
                action,
                read_body,
                client[0] if client else "",
                header(scope, b"user-agent"),
            )
        except RequestAborted:
            return  # the sender hung up before its body came
        except DatabaseError as error:
            log.warning("ping not recorded, the database failed: %s", error)
            given = views.Answer(503, "the database is unavailable: try again")
    await respond(send, given, close)


async def respond(send: Any, given: views.Answer, close: bool) -> None:
    body = given.text.encode()
    headers = common_headers()
    headers.append((b"content-length", str(len(body)).encode()))
    headers.extend((name.lower().encode(), value.encode()) for name, value in given.headers)
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": given.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
