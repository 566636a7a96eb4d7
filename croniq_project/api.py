"""The single NinjaAPI; each app contributes a Router (STYLE.md, "Layout").

Errors are answered once, here, as JSON `{"detail": "..."}` (docs/design.md §4):
bad input never becomes a 500.
"""

import logging
from collections.abc import Iterable

from django.core.exceptions import RequestDataTooBig
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import HttpError, ValidationError

api = NinjaAPI(title="Croniq", version="1", urls_namespace="api")
log = logging.getLogger(__name__)


@api.exception_handler(ValidationError)
def invalid_input(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors = [
        {
            "loc": location(error.get("loc", ())),
            "msg": str(error.get("msg", "")),
            "type": str(error.get("type", "")),
        }
        for error in exc.errors
    ]
    detail = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors) or "invalid input"
    return api.create_response(request, {"detail": detail, "errors": errors}, status=422)


def location(loc: Iterable[object]) -> list[str]:
    """("body", "body", "wait") -> ["body", "wait"]: ninja repeats the parameter name."""
    parts = [str(part) for part in loc]
    if len(parts) > 1 and parts[0] == parts[1]:
        parts = parts[1:]
    return parts


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    status = exc.status_code
    if status == 400:
        # django-ninja answers an unparsable JSON body with 400; the
        # protocol says 422 for any invalid body.
        status = 422
    return api.create_response(request, {"detail": str(exc)}, status=status)


@api.exception_handler(RequestDataTooBig)
def too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return api.create_response(request, {"detail": "request body too large"}, status=413)


@api.exception_handler(OperationalError)
def database_unavailable(request: HttpRequest, exc: OperationalError) -> HttpResponse:
    # The caller learns only that the database failed; the operator needs the
    # reason (a server gone, or a schema not yet migrated: "no such column").
    log.warning("%s %s: database unavailable: %s", request.method, request.path, exc)
    return api.create_response(request, {"detail": "database unavailable"}, status=503)


def add_app_routers() -> None:
    """Routers are added lazily so apps can import this module freely."""
    from control.api import routers
    from dispatch.api import executions_router, runners_router
    from dispatch.refusals import Refused

    api.add_router("/v1/runners/", runners_router)
    api.add_router("/v1/executions/", executions_router)
    for prefix, router in routers():
        api.add_router(prefix, router)

    @api.exception_handler(Refused)
    def refused(request, exc):
        return api.create_response(request, {"detail": exc.detail}, status=exc.status)


add_app_routers()
