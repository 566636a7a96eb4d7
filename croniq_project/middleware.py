"""Async-capable versions of the third-party middleware Croniq uses.

Under ASGI a single sync-only middleware makes Django run the whole chain in
a worker thread and hop back to the event loop for the async runner views:
two thread hops and a thread held for every request, long-polls included.
These subclasses do the same (cheap, non-blocking) work inline instead.

A framework override (core/framework_overrides.py): with CRONIQ_STOCK_DJANGO
naming `middleware`, or on a Django or WhiteNoise release it has not been
verified with, MIDDLEWARE names the stock classes instead
(croniq_project/middleware_list.py, STOCK_MIDDLEWARE).
"""

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import IO, Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.middleware.security import SecurityMiddleware
from django.utils.deprecation import MiddlewareMixin
from django_prometheus.middleware import PrometheusAfterMiddleware, PrometheusBeforeMiddleware
from whitenoise.middleware import WhiteNoiseMiddleware


class AsyncCapable:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        super().__init__(get_response)
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        return super().__call__(request)


class StaticFilesMiddleware(AsyncCapable, WhiteNoiseMiddleware):
    """WhiteNoise: static files answered from memory-mapped lookups; every
    other request goes straight on, without leaving the event loop."""

    async def __acall__(self, request):
        if self.autorefresh:
            static_file = self.find_file(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return read_in_threads(self.serve(static_file, request))
        return await self.get_response(request)


# Static files are small: most are sent in one block, one thread hop.
STATIC_BLOCK_SIZE = 64 * 1024


def read_in_threads(response: HttpResponse) -> HttpResponse:
    """WhiteNoise's file response, its body read by an async iterator.

    WhiteNoise streams through a plain iterator, which Django's ASGI handler
    warns about for every file (then reads it whole in a thread). Here each
    block is read in a thread, so the event loop never waits on the disk.
    The file is still closed with the response, as FileResponse arranged.
    """
    response.streaming_content = file_blocks(response.file_to_stream)
    return response


async def file_blocks(file: IO[bytes] | None) -> AsyncIterator[bytes]:
    if file is None:  # HEAD, 304: headers only
        return
    while block := await asyncio.to_thread(file.read, STATIC_BLOCK_SIZE):
        yield block


class MetricsBeforeMiddleware(AsyncCapable, PrometheusBeforeMiddleware):
    async def __acall__(self, request):
        self.process_request(request)  # counters only: no I/O
        response = await self.get_response(request)
        return self.process_response(request, response)


class MetricsAfterMiddleware(AsyncCapable, PrometheusAfterMiddleware):
    async def __acall__(self, request):
        self.process_request(request)
        response = await self.get_response(request)
        return self.process_response(request, response)

    # Declared async so Django calls them on the event loop, not in a thread;
    # they only update in-process counters.
    async def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        *view_args: Any,
        **view_kwargs: Any,
    ) -> HttpResponse | None:
        return PrometheusAfterMiddleware.process_view(
            self, request, view_func, *view_args, **view_kwargs
        )

    async def process_exception(
        self, request: HttpRequest, exception: Exception
    ) -> HttpResponse | None:
        return PrometheusAfterMiddleware.process_exception(self, request, exception)


# -- Django's own middleware under ASGI ------------------------------------
#
# Each of Django's middlewares is a `MiddlewareMixin`: under ASGI its
# process_request and process_response each run in a thread via
# `sync_to_async`. Two kinds of work are done here without that hop:
#
# - header-only middlewares (security, common, clickjacking) do no I/O, so
#   they run inline on the event loop for every request;
# - the browser middlewares (sessions, CSRF, auth, messages) are skipped
#   for the runner API: it authenticates with a bearer token, sets no
#   cookies and reads no session, and its views are CSRF-exempt anyway.
#   Every other path (admin, dashboard) goes through them unchanged.


RUNNER_API_PREFIX = "/api/v1/"
# Check-in pings (checks.views, docs/design.md §12): calls of machines too,
# a thousand a second, which no browser session, CSRF cookie or message touches.
PING_PREFIX = "/ping/"
MACHINE_PREFIXES = (RUNNER_API_PREFIX, PING_PREFIX)


def is_runner_api(request: HttpRequest) -> bool:
    """A runner call or a ping: the browser middleware goes straight past."""
    return request.path_info.startswith(MACHINE_PREFIXES)


class Inline:
    """A MiddlewareMixin whose hooks do no I/O: run them on the event loop."""

    async def __acall__(self, request):
        response = None
        if hasattr(self, "process_request"):
            response = self.process_request(request)
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            response = self.process_response(request, response)
        return response


class SkippedForRunnerApi:
    """A browser middleware the runner API goes straight past."""

    async def __acall__(self, request):
        if is_runner_api(request):
            return await self.get_response(request)
        return await super().__acall__(request)


class SecurityHeadersMiddleware(Inline, SecurityMiddleware):
    pass


class CommonRequestMiddleware(Inline, CommonMiddleware):
    pass


class FrameOptionsMiddleware(Inline, XFrameOptionsMiddleware):
    pass


class ApiErrors(MiddlewareMixin):
    """Errors under /api/ are JSON ({"detail": ...}), as the runner protocol
    says (docs/design.md §4), also where no API view answered: Django's 404 page
    for an unknown path and django-ninja's empty 405 for a wrong method.
    A client in any language then reads every refusal the same way.
    Croniq's own behaviour: with the `middleware` override off
    (core/framework_overrides.py) Django runs it as any MiddlewareMixin."""

    DETAILS = {404: "Not Found", 405: "Method Not Allowed"}

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        detail = self.DETAILS.get(response.status_code)
        if detail is None or not request.path_info.startswith("/api/"):
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response  # the API's own answer, e.g. "execution not found"
        answer = JsonResponse({"detail": detail}, status=response.status_code)
        if response.has_header("Allow"):
            answer["Allow"] = response["Allow"]
        return answer


class ApiErrorsMiddleware(Inline, ApiErrors):
    pass


class BrowserSessionMiddleware(SkippedForRunnerApi, SessionMiddleware):
    pass


class BrowserCsrfMiddleware(SkippedForRunnerApi, CsrfViewMiddleware):
    def __init__(self, get_response):
        super().__init__(get_response)
        if self.async_mode:
            # Django reads process_view once, at startup: under ASGI it gets
            # this coroutine, which answers the runner API on the event loop
            # and checks everything else in a thread as before.
            self.process_view = self.process_view_async

    async def process_view_async(
        self,
        request: HttpRequest,
        callback: Callable[..., Any],
        callback_args: tuple[Any, ...],
        callback_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        if is_runner_api(request):
            return None
        return await sync_to_async(CsrfViewMiddleware.process_view, thread_sensitive=True)(
            self, request, callback, callback_args, callback_kwargs
        )


class BrowserAuthenticationMiddleware(SkippedForRunnerApi, AuthenticationMiddleware):
    pass


class BrowserMessageMiddleware(SkippedForRunnerApi, MessageMiddleware):
    pass
