"""Croniq's own Prometheus series (docs/design.md §4, "Metrics (contract)").

Every value is read from the database at scrape time: persisted counters and
histogram rows (audit.Counter, written by audit.increment / audit.observe),
the scheduler's heartbeat, each job's health row, and a few aggregates over
runners, jobs, pending executions and notifications. So every web process
exports the same numbers, and they survive restarts of any process.

A scrape costs a fixed handful of queries, whatever the size of the
execution table: counters are rows, not counts over executions, and the
per-job series (`job_metrics`) come from one read of the jobs joined to
their health.
"""

import logging
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from django.db.models import Count, Min, QuerySet
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from croniq_project.job_metrics import JobRow, job_families, job_rows

# Stored counter rows of one family: [(labels, value)].
Rows = list[tuple[dict[str, str], float]]
# A runner as the gauges read it: (name, state, flapping, labels).
RunnerRow = tuple[str, str, bool, list[str] | None]

logger = logging.getLogger(__name__)

# Counter families of the contract: stored name -> (label names, help).
COUNTERS = {
    "croniq_runner_takeovers_total": (
        ("runner",),
        "Registrations of a runner name by a new session (takeovers).",
    ),
    "croniq_executions_reaped_total": (
        ("reason",),
        "Running executions marked lost (lease expired, runner superseded or forgotten).",
    ),
    "croniq_executions_total": (("state",), "Executions that reached a final state."),
    "croniq_singleton_skips_total": (
        ("job",),
        "Occurrences of a singleton job skipped because a run was still active.",
    ),
    "croniq_overlap_skips_total": (
        ("job",),
        "Occurrences skipped by a job's overlap policy: a full queue, or a waiting "
        "run a newer one replaced.",
    ),
    "croniq_fanout_unserved_total": (
        ("job",),
        "Occurrences of a run_on: all job skipped because no runner with its labels was online.",
    ),
    "croniq_overlap_replacements_total": (
        ("job",),
        "Runs stopped (running) or cancelled (waiting) by a newer occurrence of an "
        "overlap replace job.",
    ),
    "croniq_fencing_rejections_total": (
        (),
        "Runner calls refused because they carried a stale lease or session.",
    ),
    "croniq_job_errors_total": (
        ("job",),
        "Jobs the scheduler could not fire and took out of the schedule (quarantined).",
    ),
    "croniq_requirements_unmet_total": (
        ("job",),
        "Occurrences whose job's requirements were unmet at their instant (requires): "
        "each waited, was skipped or failed as its requires_policy says.",
    ),
    "croniq_notifications_total": (
        ("channel", "event", "outcome"),
        "Notification delivery outcomes by channel and event.",
    ),
    "croniq_executions_handed_back_total": (
        (),
        "Executions claimed for a poll whose runner hung up or handed them back unstarted; "
        "pending again at once.",
    ),
    "croniq_retries_total": (
        ("reason",),
        "Retries created, by why: the run failed, timed out or was lost, or an operator asked.",
    ),
    "croniq_executions_given_up_total": (
        ("reason",),
        "Lost executions not retried again (their runners kept vanishing), by lost reason.",
    ),
    "croniq_misfires_total": (
        ("job",),
        "Times the scheduler found a job's occurrences missed (it was down or behind past "
        "the misfire grace); the job's misfire_policy decided what ran.",
    ),
    "croniq_history_pruned_total": (
        ("kind",),
        "Rows of history deleted by retention (executions, logs).",
    ),
    "croniq_runner_binding_refusals_total": (
        (),
        "Registrations refused because the runner name belongs to another token.",
    ),
    "croniq_runner_flaps_total": (
        ("runner",),
        "Times a runner was marked flapping (too many takeovers in the window).",
    ),
    "croniq_secret_reads_total": (
        ("project",),
        "Secrets read from the store into the assignments of claimed runs.",
    ),
}
# Outcomes the delivery code counts; exported at 0 for the routes the rules
# define, so `rate(...{outcome="given_up"})` sees the first one.
NOTIFICATION_OUTCOMES = ("delivered", "failed", "given_up")
DISPATCH_LATENCY = "croniq_dispatch_latency_seconds"
HISTOGRAMS = {
    DISPATCH_LATENCY: (
        "Seconds from an execution being ready to its assignment leaving for the runner's poll."
    ),
    "croniq_notification_delivery_seconds": "Seconds one try to deliver a notification took.",
}
# Families computed at scrape time: a stored counter never takes their names.
GAUGES = {
    "croniq_runner_flapping",
    "croniq_runners",
    "croniq_executions_pending",
    "croniq_executions_pending_unmatched",
    "croniq_scheduler_lag_seconds",
    "croniq_scheduler_last_tick_timestamp_seconds",
    "croniq_jobs_quarantined",
    "croniq_notifications_pending",
    "croniq_job_last_success_timestamp_seconds",
    "croniq_job_last_failure_timestamp_seconds",
    "croniq_job_period_seconds",
    "croniq_job_runs",
    "croniq_maintenance",
    "croniq_concurrency_group_running",
    "croniq_concurrency_group_budget",
}
# audit.observe stores a histogram as these rows (see audit.recording.observe).
BUCKET, COUNT, SUM_US = "__bucket", "__count", "__sum_us"

METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class CroniqCollector:
    """Registered once per process on prometheus_client's REGISTRY.

    `clock` is the seam tests use to scrape at a fixed instant.
    """

    def __init__(self, clock: Callable[[], datetime] = timezone.now) -> None:
        self.clock = clock

    def describe(self) -> list[Metric]:
        # Declaring nothing up front keeps registration from querying the
        # database (at import time there may be no tables yet).
        return []

    def collect(self) -> Iterator[Metric]:
        return families(self.clock())


def families(now: datetime) -> Iterator[Metric]:
    """Every Croniq metric family, as of `now`."""
    from runners.models import Runner

    counters, histograms = stored_series()
    runners = list(Runner.objects.values_list("name", "state", "flapping", "labels"))
    jobs = job_rows()
    yield from contract_counters(counters, runners, jobs)
    yield from other_counters(counters)
    for name in sorted(set(HISTOGRAMS) | set(histograms)):
        yield histogram_family(name, histograms.get(name, {}))
    yield from runner_gauges(runners)
    yield from execution_gauges(runners)
    yield from scheduler_gauges(now, jobs)
    yield from job_families(jobs, now)
    yield notification_gauge()
    yield check_gauge()
    yield maintenance_gauge(now)
    yield from group_gauges()


# Stored rows


def label_dict(key: str) -> dict[str, str]:
    """Counter.labels ("k=v,k=v") -> dict."""
    if not key:
        return {}
    return dict(pair.split("=", 1) for pair in key.split(",") if "=" in pair)


def stored_series() -> tuple[dict[str, Rows], dict[str, dict[str, Any]]]:
    """All Counter rows in one query, split into counters and histograms.

    Counters: {family name without _total: [(labels dict, value)]}; a row
    stored with or without the `_total` suffix lands in the same family.
    Histograms: {name: {"buckets": {le: value}, "sum_us": value}}.
    """
    from audit.models import Counter

    counters = defaultdict(list)
    histograms = defaultdict(lambda: {"buckets": {}, "sum_us": 0})
    for name, key, value in Counter.objects.totals():
        labels = label_dict(key)
        if name.endswith(BUCKET):
            histograms[name.removesuffix(BUCKET)]["buckets"][labels.get("le", "")] = value
        elif name.endswith(SUM_US):
            histograms[name.removesuffix(SUM_US)]["sum_us"] += value
        elif name.endswith(COUNT):
            continue  # the +Inf bucket is the count
        else:
            counters[name.removesuffix("_total")].append((labels, value))
    return counters, histograms


def counter_family(
    name: str,
    help_text: str,
    label_names: Sequence[str],
    rows: Rows,
    seeds: Iterable[tuple[str, ...]] = (),
) -> CounterMetricFamily:
    """A counter family summed onto `label_names`; `seeds` are label value
    tuples exported as 0 until their first increment, so `increase()` sees
    the first event too."""
    samples = dict.fromkeys(seeds, 0)
    for labels, value in rows:
        values = tuple(labels.get(label, "") for label in label_names)
        samples[values] = samples.get(values, 0) + value
    family = CounterMetricFamily(name, help_text, labels=label_names)
    for values, value in sorted(samples.items()):
        family.add_metric(list(values), value)
    return family


def contract_counters(
    counters: dict[str, Rows], runners: list[RunnerRow], jobs: list[JobRow]
) -> Iterator[Metric]:
    from audit.recording import label_value

    seeds = {
        "croniq_runner_takeovers_total": [(label_value(name),) for name, *_ in runners],
        "croniq_executions_reaped_total": [(reason,) for reason in reap_reasons()],
        "croniq_executions_total": [(state,) for state in final_states()],
        "croniq_singleton_skips_total": [(label_value(j.name),) for j in jobs if j.singleton],
        "croniq_overlap_skips_total": [
            (label_value(j.name),) for j in jobs if j.overlap in ("queue", "replace")
        ],
        "croniq_overlap_replacements_total": [
            (label_value(j.name),) for j in jobs if j.overlap == "replace"
        ],
        "croniq_fanout_unserved_total": [(label_value(j.name),) for j in jobs if j.run_on == "all"],
        "croniq_fencing_rejections_total": [()],
        # Not seeded per job: that would be a series for every job.
        "croniq_job_errors_total": [],
        # Per job, once an occurrence of it found its requirements unmet.
        "croniq_requirements_unmet_total": [],
        "croniq_notifications_total": notification_routes(),
        "croniq_executions_handed_back_total": [()],
        "croniq_retries_total": [(reason,) for reason in retry_reasons()],
        "croniq_executions_given_up_total": [(reason,) for reason in reap_reasons()],
        # Per job, like croniq_job_errors_total: a series once a job misfired.
        "croniq_misfires_total": [],
        "croniq_history_pruned_total": [("executions",), ("logs",)],
        "croniq_runner_binding_refusals_total": [()],
        "croniq_runner_flaps_total": [(label_value(name),) for name, *_ in runners],
        # The default project, where every secret lives until projects come.
        "croniq_secret_reads_total": [("default",)],
    }
    for name, (label_names, help_text) in COUNTERS.items():
        rows = counters.get(name.removesuffix("_total"), [])
        yield counter_family(name, help_text, label_names, rows, seeds[name])


def other_counters(counters: dict[str, Rows]) -> Iterator[Metric]:
    """Counters COUNTERS does not name: exported as stored, with a generic help."""
    taken = {name.removesuffix("_total") for name in COUNTERS} | set(HISTOGRAMS) | GAUGES
    for name, rows in sorted(counters.items()):
        if name in taken:
            continue
        label_names = sorted({label for labels, _ in rows for label in labels})
        if not METRIC_NAME.match(name) or not all(map(valid_label_name, label_names)):
            logger.warning("metrics: counter %r has an invalid name or label; not exported", name)
            continue
        yield counter_family(name, f"Croniq counter {name}.", label_names, rows)


def valid_label_name(label: str) -> bool:
    return bool(LABEL_NAME.match(label)) and not label.startswith("__") and label != "le"


def histogram_family(name: str, stored: dict[str, Any]) -> HistogramMetricFamily:
    """A Prometheus histogram from audit.observe's per-bucket (non-cumulative) rows."""
    from audit.recording import LATENCY_BUCKETS

    per_bound = dict.fromkeys(map(float, LATENCY_BUCKETS), 0)
    for le, value in stored.get("buckets", {}).items():
        try:
            bound = float(le)
        except ValueError:
            logger.warning("metrics: histogram %s has a bucket le=%r; ignored", name, le)
            continue
        per_bound[bound] = per_bound.get(bound, 0) + value
    beyond = per_bound.pop(math.inf, 0)
    buckets, cumulative = [], 0
    for bound in sorted(per_bound):
        cumulative += per_bound[bound]
        buckets.append((floatToGoString(bound), cumulative))
    buckets.append(("+Inf", cumulative + beyond))
    help_text = HISTOGRAMS.get(name, f"Croniq histogram {name}.")
    sum_seconds = stored.get("sum_us", 0) / 1_000_000
    return HistogramMetricFamily(name, help_text, buckets=buckets, sum_value=sum_seconds)


# Known label values, exported as zeros before their first increment


def reap_reasons() -> list[str]:
    from scheduler.runs import lifecycle

    return sorted(
        {
            lifecycle.LEASE_EXPIRED,
            lifecycle.RUNNER_SUPERSEDED,
            lifecycle.RUNNER_FORGOTTEN,
            lifecycle.RUNNER_DRAINED,
            lifecycle.RUNNER_GONE,
        }
    )


def retry_reasons() -> list[str]:
    """What a retry is counted under: the state of the run it repeats (see
    scheduler.runs.lifecycle.create_retry), or an operator's retry."""
    from scheduler.models import Execution

    return sorted({Execution.FAILED, Execution.TIMED_OUT, Execution.LOST, "operator"})


def final_states() -> Sequence[str]:
    from scheduler.models import Execution

    return Execution.FINAL_STATES


def notification_routes() -> list[tuple[str, str, str]]:
    """(channel, event, outcome) for each event an enabled rule sends to an
    enabled channel: bounded by the configuration, not by the traffic."""
    from audit.recording import label_value
    from notifications.models import Rule

    links = Rule.channels.through.objects.filter(rule__enabled=True, channel__enabled=True)
    seeds = set()
    for events, channel in links.values_list("rule__events", "channel__name"):
        for event in events if isinstance(events, list) else []:
            for outcome in NOTIFICATION_OUTCOMES:
                seeds.add((label_value(channel), label_value(event), outcome))
    return sorted(seeds)


# Gauges read at scrape time


def runner_gauges(runners: list[RunnerRow]) -> Iterator[Metric]:
    from audit.recording import label_value
    from runners.models import Runner

    flapping = GaugeMetricFamily(
        "croniq_runner_flapping",
        "1 while a runner is marked flapping (too many takeovers in the window).",
        labels=["runner"],
    )
    by_state = dict.fromkeys((state for state, _ in Runner.STATES), 0)
    for name, state, is_flapping, _ in runners:
        flapping.add_metric([label_value(name)], 1 if is_flapping else 0)
        by_state[state] = by_state.get(state, 0) + 1
    yield flapping
    states = GaugeMetricFamily("croniq_runners", "Known runners by state.", labels=["state"])
    for state, count in sorted(by_state.items()):
        states.add_metric([state], count)
    yield states


def execution_gauges(runners: list[RunnerRow]) -> Iterator[Metric]:
    from runners.models import Runner
    from scheduler.models import Execution

    pending = Execution.objects.filter(state=Execution.PENDING)
    total = GaugeMetricFamily("croniq_executions_pending", "Executions waiting for a runner.")
    total.add_metric([], pending.count())
    yield total
    online = [set(labels or []) for _, state, _, labels in runners if state == Runner.ONLINE]
    unmatched = GaugeMetricFamily(
        "croniq_executions_pending_unmatched",
        "Pending executions whose job labels no online runner carries, by job labels.",
        labels=["labels"],
    )
    for labels, count in sorted(unmatched_pending(pending, online).items()):
        unmatched.add_metric([labels], count)
    yield unmatched


def unmatched_pending(pending: QuerySet, online_label_sets: list[set[str]]) -> dict[str, int]:
    """{"a,b": n} for pending executions no online runner could take.

    One GROUP BY over the pending executions' job labels; the matching runs
    over the few distinct label sets, not over executions.
    """
    result = defaultdict(int)
    groups = pending.values_list("job__labels").annotate(n=Count("id")).order_by()
    for labels, count in groups:
        needed = set(labels or [])
        if not any(needed <= carried for carried in online_label_sets):
            result[",".join(sorted(needed))] += count
    return result


def scheduler_gauges(now: datetime, jobs: list[JobRow]) -> Iterator[Metric]:
    import audit
    from scheduler.models import Job

    # Served by the job_due partial index (enabled, unpaused, by next_run_at).
    oldest_due = Job.objects.filter(
        enabled=True, paused_at__isnull=True, next_run_at__lte=now
    ).aggregate(oldest=Min("next_run_at"))["oldest"]
    lag = GaugeMetricFamily(
        "croniq_scheduler_lag_seconds",
        "Seconds since the oldest due next_run_at of an enabled, unpaused job (0: none due).",
    )
    lag.add_metric([], max(0.0, (now - oldest_due).total_seconds()) if oldest_due else 0.0)
    yield lag
    last = audit.last_tick()
    tick = GaugeMetricFamily(
        "croniq_scheduler_last_tick_timestamp_seconds",
        "Unix time of the scheduler loop's last finished tick (0: never).",
    )
    tick.add_metric([], last.timestamp() if last else 0.0)
    yield tick
    # A state, beside the croniq_job_errors_total events: an alert on it stays
    # firing until an operator clears the job, however long ago it broke.
    quarantined = GaugeMetricFamily(
        "croniq_jobs_quarantined",
        "Jobs the scheduler took out of the schedule because they could not be fired.",
    )
    quarantined.add_metric([], sum(1 for job in jobs if job.quarantined))
    yield quarantined


def maintenance_gauge(now: datetime) -> GaugeMetricFamily:
    from scheduler.runs import maintenance

    gauge = GaugeMetricFamily(
        "croniq_maintenance",
        "1 while a maintenance (the switch or a window) is in force, 0 otherwise.",
    )
    gauge.add_metric([], 1.0 if maintenance.in_force(now) else 0.0)
    return gauge


def group_gauges() -> Iterator[Metric]:
    """Each concurrency group's budget and how much of it runs now."""
    from scheduler.models import ConcurrencyGroup
    from scheduler.runs import groups

    budgets = list(ConcurrencyGroup.objects.values_list("pk", "name", "max_concurrent"))
    running = groups.running_counts() if budgets else {}
    used = GaugeMetricFamily(
        "croniq_concurrency_group_running",
        "Running executions of a concurrency group's jobs.",
        labels=["group"],
    )
    budget = GaugeMetricFamily(
        "croniq_concurrency_group_budget",
        "A concurrency group's max_concurrent.",
        labels=["group"],
    )
    for pk, name, most in budgets:
        used.add_metric([name], running.get(pk, 0))
        budget.add_metric([name], most)
    yield used
    yield budget


def check_gauge() -> GaugeMetricFamily:
    """Checks by state (docs/design.md §12), every state present (0 when none):
    one grouped count over the checks table."""
    from checks.models import Check
    from checks.states import STATES

    by_state = dict.fromkeys(STATES, 0)
    for row in Check.objects.values("state").annotate(n=Count("id")).order_by():
        by_state[row["state"]] = row["n"]
    gauge = GaugeMetricFamily("croniq_checks", "Check-ins by state.", labels=["state"])
    for state, count in sorted(by_state.items()):
        gauge.add_metric([state], count)
    return gauge


def notification_gauge() -> GaugeMetricFamily:
    from notifications.models import Notification

    # Counted through the `notification_due` partial index (state pending).
    pending = GaugeMetricFamily(
        "croniq_notifications_pending",
        "Notifications waiting to be delivered (including those between retries).",
    )
    pending.add_metric([], Notification.objects.filter(state=Notification.PENDING).count())
    return pending
