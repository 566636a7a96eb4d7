"""The ASGI handler: Django's, with a lean path for the runner protocol.

For every request Django's ASGIHandler opens a `ThreadSensitiveContext`
(its sync code gets a new thread, started and joined per request) and sends
`request_started` / `request_finished` through `sync_to_async` (two more
thread hops). Their receivers reset the query log and close the request
thread's stale database connection.

Runner calls (`/api/v1/`) are async views whose database steps run in the
hub's own database threads (`core.db_threads.run_db`), never on the request's
thread: those signals have nothing to do for them, and at a few hundred
calls a second the threads cost more than the calls. So they are handled
here on the event loop alone; check-in pings (`/ping/`, a thousand a
second) are answered by their ASGI endpoint (`checks.endpoint`) without a
Django request at all; every other path (admin, dashboard, metrics) goes
through Django's handler unchanged. A
poll answered with work claimed ahead of its instant is rendered at once
and sent at the instant; a poll whose runner hangs up before its answer
leaves hands its work back (`dispatch.polls.AnswerHold`). The management API's sync views share
`/api/v1/` and this path; the stale connection of the thread they run in is
closed around each call, as the skipped signals would (`answer_in_a_thread`).

Why it stays (measured 2026-12-01, `bench/dispatch_latency.py --only throughput`:
2,000 claims+finishes over HTTP, 16 runners, one uvicorn worker, on a busy
two-CPU machine), this handler against Django's plain `ASGIHandler`:

| backend | this handler | Django's handler |
| --- | --- | --- |
| PostgreSQL | 593-659/s, 1.09-1.17 ms web CPU per execution | 343-379/s, 1.75-1.88 ms |
| SQLite | 491-805/s, 0.88-1.2 ms | 254-298/s, 1.7-1.92 ms |

About twice the runner calls per second for 40% less CPU each. It is the
project's (the ASGI entry point), not the runners app's: runners only gives
each call its answer hold.

A framework override (core/framework_overrides.py): it calls ASGIHandler's
undocumented steps (read_body, create_request, run_get_response,
send_response). With CRONIQ_STOCK_DJANGO naming `asgi_handler`, or on a
Django release it has not been verified with, every request goes through
Django's handler (dispatch.polls then holds a poll's answer in the view).
"""

import asyncio
import contextlib
import functools
import logging
import re
from typing import Any

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.core.exceptions import DisallowedHost, RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve, set_script_prefix

from checks import endpoint
from control import webhooks_api
from core.framework_overrides import in_use
from core.request_bodies import read_capped_body
from croniq_project.lifespan import lifespan
from croniq_project.middleware import MACHINE_PREFIXES, PING_PREFIX, RUNNER_API_PREFIX
from dispatch.hub import hub, stopping
from dispatch.polls import AnswerHold, sleep_until
from scheduler.jobs import webhooks

log = logging.getLogger(__name__)


NUMBERS = re.compile(r"\d+")
# A job's webhook URL needs no key either (control.webhooks_api): its view
# refuses a body past its limit, so one byte more than that is read.
WEBHOOK_BODY_KEPT = webhooks_api.MAX_BODY + 1


def runs_in_a_thread(path: str) -> bool:
    """Whether the view of `path` (under /api/v1/) is sync: Django runs it in
    a thread. Asked on every runner call, and resolving costs about a tenth
    of such a call, so the answer is cached by the path with its numbers
    zeroed: the protocol's paths differ only in their ids. The pings'
    view (checks.views.ping) is async, whatever its token, and so is a
    webhook call's (control.webhooks_api): a flood of made-up tokens never
    fills the cache."""
    if path.startswith((PING_PREFIX, webhooks.PATH)):
        return False
    rest = path.removeprefix(RUNNER_API_PREFIX)
    return resolves_to_sync(RUNNER_API_PREFIX + NUMBERS.sub("0", rest))


@functools.lru_cache(maxsize=1024)
def resolves_to_sync(path: str) -> bool:
    try:
        return not iscoroutinefunction(resolve(path).func)
    except Resolver404:
        return False


def refused_host(request: HttpRequest) -> JsonResponse | None:
    """A JSON 400 for a Host header Django refuses, or None.

    Django's middleware would answer it with an HTML page and log a
    traceback; a runner call answers JSON (docs/design.md §4) and the refusal is
    one log line.
    """
    try:
        request.get_host()
    except DisallowedHost as error:
        log.warning("runner call refused: %s", error)
        return JsonResponse({"detail": "invalid Host header"}, status=400)
    return None


class CroniqASGIHandler(ASGIHandler):
    def __init__(self):
        super().__init__()
        self.lean = in_use("asgi_handler")

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            # Django speaks no lifespan; Croniq's tells the process it is
            # stopping (croniq_project.lifespan).
            await lifespan(scope, receive, send)
        elif self.lean and scope["type"] == "http" and endpoint.is_ping(scope["path"]):
            await endpoint.serve(scope, receive, send, close=stopping())
        elif self.lean and scope["type"] == "http" and scope["path"].startswith(MACHINE_PREFIXES):
            await self.handle_runner_call(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def handle_runner_call(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            if scope["path"].startswith(webhooks.PATH):
                body_file = await read_capped_body(receive, WEBHOOK_BODY_KEPT)
            else:
                body_file = await self.read_body(receive)
        except RequestAborted:
            return
        with body_file:
            set_script_prefix(get_script_prefix(scope))
            request, response = self.create_request(scope, body_file)
            if request is not None:
                response = refused_host(request)
            if response is None and runs_in_a_thread(request.path_info):
                response = await self.answer_in_a_thread(request)
            if response is None:
                request.answer_hold = AnswerHold()
                response = await self.answer_unless_gone(request, receive)
            if response is not None:
                if stopping():
                    # The process is stopping: each connection closes after
                    # its answer, so the runner's next call opens a new one,
                    # which a balancer sends to a server that stays.
                    response["Connection"] = "close"
                await self.send_response(response, send)

    async def answer_in_a_thread(self, request: HttpRequest) -> HttpResponse:
        """A sync view's response (the management API's calls beside the
        runner protocol). Django runs it in the one thread of sync code; what
        request_started and request_finished would do for that thread's
        connection is done here: a connection broken by a database restart,
        or past CONN_MAX_AGE, is closed before and after the call."""
        await sync_to_async(close_old_connections)()
        try:
            return await self.run_get_response(request)
        finally:
            await sync_to_async(close_old_connections)()

    async def answer_unless_gone(self, request: HttpRequest, receive: Any) -> HttpResponse | None:
        """The view's response when its hold ends, or None when the caller
        hung up first.

        A long-poll whose runner disconnected is cancelled (as Django does),
        so it leaves the hub instead of claiming work nobody will receive;
        an answer it already has is handed back (`AnswerHold.unanswered`).
        """
        answer = asyncio.create_task(self.held_response(request))
        gone = asyncio.create_task(self.listen_for_disconnect(receive))
        await asyncio.wait((answer, gone), return_when=asyncio.FIRST_COMPLETED)
        gone.cancel()
        if gone.done() and not gone.cancelled():
            gone.exception()  # the disconnect, seen: asyncio need not log it
        if answer.done():
            return answer.result()
        answer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await answer
        if request.answer_hold.unanswered is not None:
            hub().spawn(request.answer_hold.unanswered())
        return None

    async def held_response(self, request: HttpRequest) -> HttpResponse:
        response = await self.run_get_response(request)
        await sleep_until(request.answer_hold.until)
        request.answer_hold.release()
        return response
