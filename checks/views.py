"""The ping endpoints (docs/design.md §12): no key, the token is the secret.

`GET|POST /ping/<token>` is a success; `/start`, `/fail`, `/log` and
`/<exit status 0-255>` as healthchecks.io has them. Answers `200 OK`, 404
for a token no check has, 429 past the token's flood limit
(`checks.pings`), 400 for an exit status past 255.

Thought of as an attacker would:

- Enumeration: a token is 256 random bits; an unknown one costs the same
  single probe of the token's unique index as a known one, and nothing
  lists or hints at tokens (a malformed one is answered 404 before any
  query, which tells nothing about real ones).
- HEAD (link previews, uptime probes that only look): 200, records
  nothing, no query, so it neither fakes a success nor tells valid tokens
  from invalid ones.
- Bodies: only the first 100 KB are read into the ping; the rest is not
  kept, and the answer carries `Croniq-Body-Truncated: true`. Bytes that are
  not UTF-8 are stored as U+FFFD, never refused.
- A body, header or query naming another check changes nothing: the URL's
  token alone picks the check.
- CSRF does not apply: nothing here acts with a browser's credentials.
"""

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from checks import ping_batches, pings, states
from checks.models import MAX_BODY

# new_token's alphabet and length; anything else is no token of ours.
TOKEN = re.compile(r"[A-Za-z0-9_-]{1,64}")
ANSWERS = {
    pings.FOUND: (200, "OK"),
    pings.NOT_FOUND: (404, "not found"),
    pings.LIMITED: (429, "rate limited: too many pings for this check"),
}


@dataclass(frozen=True)
class Answer:
    """A ping's answer: plain text, and any headers beside the usual ones."""

    status: int
    text: str
    headers: tuple[tuple[str, str], ...] = ()


async def answer(
    method: str,
    token: str,
    action: str,
    read_body: Callable[[], Awaitable[bytes]],
    remote_addr: str,
    user_agent: str,
) -> Answer:
    """The answer to a ping of `method` at /ping/`token`[/`action`], recorded
    if it is one. `read_body` gives the first MAX_BODY + 1 bytes of the body;
    it is read only for a ping that may be recorded. Shared by the view
    below and the ASGI endpoint (`checks.endpoint`), which answer alike."""
    if method == "HEAD":
        return Answer(200, "")
    if method not in ("GET", "POST"):
        return Answer(405, "use GET or POST", (("Allow", "GET, POST, HEAD"),))
    kind, exit_status = kind_of(action)
    if kind == "":
        return Answer(400, "exit status must be a whole number from 0 to 255")
    if not TOKEN.fullmatch(token):
        return Answer(*ANSWERS[pings.NOT_FOUND])
    raw = await read_body()
    received = pings.Received(
        token=token,
        kind=kind,
        at=timezone.now(),
        exit_status=exit_status,
        body=raw,
        remote_addr=remote_addr,
        user_agent=user_agent,
    )
    status, text = ANSWERS[await ping_batches.record(received)]
    if len(raw) > MAX_BODY and status == 200:
        return Answer(status, text, (("Croniq-Body-Truncated", "true"),))
    return Answer(status, text)


def plain(status: int, text: str) -> HttpResponse:
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


@csrf_exempt
async def ping(request: HttpRequest, token: str, action: str = "") -> HttpResponse:
    """The pings through Django's handler: where the ASGI endpoint is
    switched off (CRONIQ_STOCK_DJANGO), and in Django's test client."""

    async def read_body() -> bytes:
        return request.read(MAX_BODY + 1)  # the stream, not request.body: no size refusal

    given = await answer(
        request.method or "",
        token,
        action,
        read_body,
        request.META.get("REMOTE_ADDR") or "",
        request.META.get("HTTP_USER_AGENT") or "",
    )
    response = plain(given.status, given.text)
    for name, value in given.headers:
        response[name] = value
    return response


def kind_of(action: str) -> tuple[str, int | None]:
    """(kind, exit status) of the URL's last part; ("", None) for an exit
    status out of range. An exit status 0 is a success, as healthchecks has it."""
    if not action:
        return states.SUCCESS, None
    if not action.isdigit():
        return action, None  # start, fail, log: the URL patterns allow no other
    if len(action) > 3 or int(action) > 255:
        return "", None
    return states.EXIT, int(action)
