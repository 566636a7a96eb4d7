"""/metrics: django-prometheus' process metrics plus Croniq's, read from the database.

Croniq's series are derived from the database at scrape time (gauges) or from
persisted counters (audit.Counter), so they are right across the web and loop
processes and survive restarts.
"""

from django_prometheus.exports import ExportToDjangoView
from prometheus_client import REGISTRY


def metrics_view(request):
    return ExportToDjangoView(request)


def register_collector():
    from croniq_project.collector import CroniqCollector

    if not getattr(register_collector, "done", False):
        REGISTRY.register(CroniqCollector())
        register_collector.done = True
