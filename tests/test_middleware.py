"""The static-file and metrics middleware run on the event loop under ASGI."""

import asyncio

from asgiref.sync import iscoroutinefunction
from django.http import HttpResponse
from django.test import RequestFactory

from croniq_project.middleware import (
    MetricsAfterMiddleware,
    MetricsBeforeMiddleware,
    StaticFilesMiddleware,
)


async def view_response(request):
    return HttpResponse("from the view")


def run(middleware, path):
    return asyncio.run(middleware(RequestFactory().get(path)))


def test_static_files_are_served_without_reaching_the_view():
    middleware = StaticFilesMiddleware(view_response)
    assert iscoroutinefunction(middleware)
    response = run(middleware, "/static/admin/css/base.css")
    try:
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/css")
    finally:
        response.close()


def test_other_requests_go_on_to_the_async_view():
    assert run(StaticFilesMiddleware(view_response), "/healthz").content == b"from the view"


def test_metrics_middleware_wraps_async_views_without_a_thread():
    for cls in (MetricsBeforeMiddleware, MetricsAfterMiddleware):
        middleware = cls(view_response)
        assert iscoroutinefunction(middleware)
        assert run(middleware, "/healthz").content == b"from the view"
    assert iscoroutinefunction(MetricsAfterMiddleware.process_view)


def test_sync_callers_still_work():
    def sync_view(request):
        return HttpResponse("sync")

    middleware = StaticFilesMiddleware(sync_view)
    assert not iscoroutinefunction(middleware)
    assert middleware(RequestFactory().get("/healthz")).content == b"sync"
