"""Async-capable versions of the third-party middleware Croniq uses.

Under ASGI a single sync-only middleware makes Django run the whole chain in
a worker thread and hop back to the event loop for the async runner views:
two thread hops and a thread held for every request, long-polls included.
These subclasses do the same (cheap, non-blocking) work inline instead.
"""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
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
            return self.serve(static_file, request)
        return await self.get_response(request)


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
    async def process_view(self, request, view_func, *view_args, **view_kwargs):
        return PrometheusAfterMiddleware.process_view(
            self, request, view_func, *view_args, **view_kwargs
        )

    async def process_exception(self, request, exception):
        return PrometheusAfterMiddleware.process_exception(self, request, exception)
