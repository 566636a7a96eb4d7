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


def test_static_files_are_served_without_reaching_the_view(db):
    # `db`: closing a response sends request_finished, which checks connections.
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


# -- Django's middleware: the runner API skips the browser ones ------------


def asgi_get(path, method="post", **extra):
    from django.test import AsyncClient

    client = AsyncClient(enforce_csrf_checks=True)
    return asyncio.run(getattr(client, method)(path, **extra))


def test_runner_api_requests_skip_session_csrf_auth_and_messages():
    response = asgi_get("/api/v1/runners/1/poll", data={}, content_type="application/json")
    assert response.status_code == 401  # the runner API's own bearer auth answered
    request = response.asgi_request
    for attr in ("session", "user", "_messages"):
        assert not hasattr(request, attr)
    assert "CSRF_COOKIE" not in request.META
    assert "Set-Cookie" not in response
    # Header-only middleware still applies.
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"


def test_admin_still_enforces_csrf_and_has_a_session_under_asgi():
    response = asgi_get("/admin/login/", data={"username": "a", "password": "b"})
    assert response.status_code == 403
    assert b"CSRF" in response.content
    request = response.asgi_request
    assert hasattr(request, "session")
    assert hasattr(request, "user")


def test_a_path_that_only_looks_like_the_api_is_not_skipped():
    response = asgi_get("/api/v1x/anything", data={})
    assert hasattr(response.asgi_request, "session")


def test_browser_middlewares_stay_sync_hooks_under_wsgi():
    from croniq_project.middleware import BrowserCsrfMiddleware

    middleware = BrowserCsrfMiddleware(lambda request: HttpResponse("sync"))
    assert not iscoroutinefunction(middleware.process_view)
    assert iscoroutinefunction(BrowserCsrfMiddleware(view_response).process_view)
