"""Croniq's own Prometheus series (DESIGN.md §4, "Metrics")."""

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class CroniqCollector:
    def describe(self):
        # Declaring nothing up front keeps registration from querying the
        # database (at import time there may be no tables yet).
        return []

    def collect(self):
        from audit.models import Counter

        by_name = {}
        for counter in Counter.objects.all():
            by_name.setdefault(counter.name, []).append(counter)
        for name, rows in sorted(by_name.items()):
            labels = sorted(rows[0].label_dict())
            family = CounterMetricFamily(name, f"Croniq counter {name}", labels=labels)
            for row in rows:
                values = row.label_dict()
                family.add_metric([values.get(k, "") for k in labels], row.value)
            yield family
        yield from self.gauges()

    def gauges(self):
        from scheduler.models import Execution

        pending = GaugeMetricFamily("croniq_executions_pending", "Executions waiting for a runner")
        pending.add_metric([], Execution.objects.filter(state=Execution.PENDING).count())
        yield pending
