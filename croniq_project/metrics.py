"""/metrics: django-prometheus' process metrics plus Croniq's, read from the database.

Croniq's series are derived from the database at scrape time (gauges) or from
persisted counters (audit.Counter), so they are right across the web and loop
processes and survive restarts.

With CRONIQ_METRICS_TOKEN set, a scrape must send `Authorization: Bearer
<token>` (job names, runner names and labels are not for everyone).
"""

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django_prometheus.exports import ExportToDjangoView
from prometheus_client import REGISTRY


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not scrape_allowed(request, settings.CRONIQ_METRICS_TOKEN):
        response = HttpResponse("metrics need a bearer token\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="croniq metrics"'
        return response
    register_collector()
    return ExportToDjangoView(request)


def scrape_allowed(request: HttpRequest, token: str) -> bool:
    if not token:
        return True
    scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(sent.strip().encode(), token.encode())


def register_collector() -> None:
    """Add Croniq's collector to the registry, once per process (at the first
    scrape: only the web process serves /metrics)."""
    from croniq_project.collector import CroniqCollector

    if not getattr(register_collector, "done", False):
        REGISTRY.register(CroniqCollector())
        register_collector.done = True
