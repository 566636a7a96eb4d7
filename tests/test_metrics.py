"""Croniq's series on /metrics (docs/design.md §4, "Metrics (contract)"), read back
through prometheus_client's own parser from rows in a real database."""

from datetime import UTC, datetime, timedelta
from itertools import count

import pytest
from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

import audit
from audit.models import Counter
from calendars.models import Calendar, CalendarPeriod
from croniq_project.collector import CroniqCollector
from notifications.models import Channel, Event, Notification, Rule
from runners.models import Runner
from scheduler.models import Execution, Job, JobHealth

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CONTRACT = {
    "croniq_runner_takeovers_total": "counter",
    "croniq_runner_flapping": "gauge",
    "croniq_runners": "gauge",
    "croniq_executions_reaped_total": "counter",
    "croniq_executions_total": "counter",
    "croniq_executions_pending": "gauge",
    "croniq_dispatch_latency_seconds": "histogram",
    "croniq_scheduler_lag_seconds": "gauge",
    "croniq_scheduler_last_tick_timestamp_seconds": "gauge",
    "croniq_singleton_skips_total": "counter",
    "croniq_fencing_rejections_total": "counter",
    "croniq_notifications_total": "counter",
    "croniq_notification_delivery_seconds": "histogram",
    "croniq_notifications_pending": "gauge",
    "croniq_job_last_success_timestamp_seconds": "gauge",
    "croniq_job_last_failure_timestamp_seconds": "gauge",
    "croniq_job_runs_total": "counter",
    "croniq_job_period_seconds": "gauge",
}
_names = count(1)


def scrape(now=NOW):
    """The exposition text of a fresh collector, as a process would serve it."""
    registry = CollectorRegistry()
    registry.register(CroniqCollector(clock=lambda: now))
    return generate_latest(registry).decode()


def samples(text):
    """{(sample name, frozenset(labels)): value} and {family name: type}."""
    values, types = {}, {}
    for family in text_string_to_metric_families(text):
        name = family.name + "_total" if family.type == "counter" else family.name
        types[name] = family.type
        for sample in family.samples:
            values[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return values, types


def value(values, name, **labels):
    return values[(name, frozenset(labels.items()))]


def make_runner(name=None, **fields):
    fields.setdefault("session", "s1")
    fields.setdefault("registered_at", NOW)
    fields.setdefault("last_seen_at", NOW)
    return Runner.objects.create(name=name or f"runner-{next(_names)}", **fields)


def make_job(name=None, **fields):
    fields.setdefault("schedule", "*/5 * * * *")
    fields.setdefault("command", "true")
    return Job.objects.create(name=name or f"job-{next(_names)}", **fields)


def make_execution(job, state=Execution.PENDING, **fields):
    scheduled_for = fields.pop("scheduled_for", NOW - timedelta(minutes=next(_names)))
    fields.setdefault("run_after", scheduled_for)
    fields.setdefault("created_at", scheduled_for)
    return Execution.objects.create(job=job, scheduled_for=scheduled_for, state=state, **fields)


@pytest.fixture
def world(db):
    """Two online runners (one flapping), one draining, pending work, counters."""
    make_runner("alpha", flapping=True, takeover_count=2, labels=["linux"])
    make_runner("beta", labels=["linux", "gpu"])
    make_runner("gamma", state=Runner.DRAINING)
    job = make_job("nightly", singleton=True, next_run_at=NOW - timedelta(seconds=90))
    make_job("hourly", next_run_at=NOW - timedelta(seconds=30))
    make_execution(make_job(), Execution.PENDING)
    make_execution(make_job(), Execution.PENDING)
    make_execution(job, Execution.RUNNING)
    for _ in range(3):
        audit.increment("croniq_executions_total", state="succeeded")
    audit.increment("croniq_executions_total", state="lost")
    audit.increment("croniq_executions_reaped_total", reason="lease_expired")
    audit.increment("croniq_runner_takeovers_total", 2, runner="alpha")
    audit.increment("croniq_singleton_skips_total", 4, job="nightly")
    audit.increment("croniq_fencing_rejections_total", 5)
    audit.observe("croniq_dispatch_latency_seconds", 0.2)
    audit.mark_tick(NOW - timedelta(seconds=1))


def test_every_contract_series_is_exported_once_with_its_type(world):
    _, types = samples(scrape())
    assert {name: types.get(name) for name in CONTRACT} == CONTRACT


def test_contract_values_come_from_the_database(world):
    values, _ = samples(scrape())
    assert value(values, "croniq_executions_total", state="succeeded") == 3
    assert value(values, "croniq_executions_total", state="lost") == 1
    assert value(values, "croniq_executions_reaped_total", reason="lease_expired") == 1
    assert value(values, "croniq_runner_takeovers_total", runner="alpha") == 2
    assert value(values, "croniq_singleton_skips_total", job="nightly") == 4
    assert value(values, "croniq_fencing_rejections_total") == 5
    assert value(values, "croniq_executions_pending") == 2
    assert value(values, "croniq_runners", state="online") == 2
    assert value(values, "croniq_runners", state="draining") == 1
    assert value(values, "croniq_runners", state="offline") == 0
    assert value(values, "croniq_scheduler_lag_seconds") == 90
    assert value(values, "croniq_scheduler_last_tick_timestamp_seconds") == NOW.timestamp() - 1


def test_flapping_is_one_zero_or_one_sample_per_runner(world):
    values, _ = samples(scrape())
    flapping = {
        dict(labels)["runner"]: v
        for (name, labels), v in values.items()
        if name == "croniq_runner_flapping"
    }
    assert flapping == {"alpha": 1, "beta": 0, "gamma": 0}


def test_the_exposition_names_each_counter_sample_once_without_a_doubled_suffix(world):
    text = scrape()
    assert "_total_total" not in text
    assert text.count('croniq_executions_total{state="succeeded"} 3.0\n') == 1
    assert text.count("# TYPE croniq_executions_total counter\n") == 1


def test_counters_survive_a_restart_because_they_live_in_the_database(world):
    before = scrape()
    audit.increment("croniq_executions_total", state="succeeded")
    # A new collector is what a restarted web process (or a second one) builds.
    after, _ = samples(scrape())
    assert samples(before)[0][("croniq_executions_total", frozenset({("state", "succeeded")}))] == 3
    assert value(after, "croniq_executions_total", state="succeeded") == 4
    assert Counter.objects.value_of("croniq_executions_total", "state=succeeded") == 4


def test_counters_without_events_still_appear_with_known_labels_at_zero(db):
    make_runner("alpha")
    make_job("solo", singleton=True)
    make_job("plain")
    values, types = samples(scrape())
    assert set(CONTRACT) <= set(types)
    assert value(values, "croniq_runner_takeovers_total", runner="alpha") == 0
    assert value(values, "croniq_singleton_skips_total", job="solo") == 0
    assert ("croniq_singleton_skips_total", frozenset({("job", "plain")})) not in values
    assert value(values, "croniq_executions_reaped_total", reason="lease_expired") == 0
    assert value(values, "croniq_executions_total", state="failed") == 0
    assert value(values, "croniq_fencing_rejections_total") == 0
    assert value(values, "croniq_scheduler_last_tick_timestamp_seconds") == 0


def test_the_latency_histogram_is_cumulative_with_inf_sum_and_count(db):
    for seconds in (0.004, 0.2, 0.2, 3, 100):
        audit.observe("croniq_dispatch_latency_seconds", seconds)
    values, _ = samples(scrape())
    bucket = "croniq_dispatch_latency_seconds_bucket"
    assert value(values, bucket, le="0.005") == 1
    assert value(values, bucket, le="0.1") == 1
    assert value(values, bucket, le="0.25") == 3
    assert value(values, bucket, le="2.5") == 3
    assert value(values, bucket, le="5.0") == 4
    assert value(values, bucket, le="60.0") == 4
    assert value(values, bucket, le="+Inf") == 5
    assert value(values, "croniq_dispatch_latency_seconds_count") == 5
    assert value(values, "croniq_dispatch_latency_seconds_sum") == pytest.approx(103.404)


def test_the_latency_histogram_is_present_before_the_first_observation(db):
    values, _ = samples(scrape())
    assert value(values, "croniq_dispatch_latency_seconds_bucket", le="+Inf") == 0
    assert value(values, "croniq_dispatch_latency_seconds_count") == 0
    assert value(values, "croniq_dispatch_latency_seconds_sum") == 0


def test_histogram_helper_rows_are_never_exported_as_counters(db):
    audit.observe("croniq_dispatch_latency_seconds", 1)
    text = scrape()
    assert "__bucket" not in text
    assert "__count" not in text
    assert "__sum_us" not in text


def test_other_counters_are_exported_generically(db):
    audit.increment("croniq_example_total", reason="lost")
    audit.increment("croniq_example_total", 2, reason="failed")
    audit.increment("croniq_other_example_total", job="nightly")
    values, types = samples(scrape())
    assert types["croniq_example_total"] == "counter"
    assert value(values, "croniq_example_total", reason="failed") == 2
    assert value(values, "croniq_example_total", reason="lost") == 1
    assert value(values, "croniq_other_example_total", job="nightly") == 1


def test_retries_and_misfires_keep_their_labels(db):
    audit.increment("croniq_retries_total", 2, reason="failed")
    audit.increment("croniq_misfires_total", job="nightly")
    values, _ = samples(scrape())
    assert value(values, "croniq_retries_total", reason="failed") == 2
    assert value(values, "croniq_retries_total", reason="lost") == 0
    assert value(values, "croniq_misfires_total", job="nightly") == 1


def test_a_counter_stored_without_the_total_suffix_joins_its_family(db):
    audit.increment("croniq_fencing_rejections_total", 2)
    audit.increment("croniq_fencing_rejections", 1)
    text = scrape()
    values, _ = samples(text)
    assert value(values, "croniq_fencing_rejections_total") == 3
    assert text.count("# TYPE croniq_fencing_rejections_total counter") == 1


def test_extra_labels_on_a_contract_counter_are_summed_away(db):
    audit.increment("croniq_executions_reaped_total", reason="lease_expired", runner="a")
    audit.increment("croniq_executions_reaped_total", reason="lease_expired", runner="b")
    values, _ = samples(scrape())
    assert value(values, "croniq_executions_reaped_total", reason="lease_expired") == 2


def test_a_counter_with_an_invalid_name_is_left_out_and_the_scrape_still_works(db, caplog):
    Counter.objects.create(name="not a metric", labels="", value=1)
    values, _ = samples(scrape())
    assert value(values, "croniq_fencing_rejections_total") == 0
    assert "not a metric" in caplog.text


def test_lag_counts_only_enabled_unpaused_due_jobs(db):
    make_job(next_run_at=NOW - timedelta(seconds=40))
    make_job(next_run_at=NOW - timedelta(hours=1), enabled=False)
    make_job(next_run_at=NOW - timedelta(hours=2), paused_at=NOW - timedelta(hours=3))
    make_job(next_run_at=NOW + timedelta(hours=1))
    values, _ = samples(scrape())
    assert value(values, "croniq_scheduler_lag_seconds") == 40


def test_lag_is_zero_when_nothing_is_due(db):
    make_job(next_run_at=NOW + timedelta(seconds=5))
    make_job(next_run_at=None)
    values, _ = samples(scrape())
    assert value(values, "croniq_scheduler_lag_seconds") == 0


def test_the_last_tick_timestamp_follows_mark_tick(db):
    audit.mark_tick(NOW - timedelta(minutes=5))
    audit.mark_tick(NOW)
    values, _ = samples(scrape())
    assert value(values, "croniq_scheduler_last_tick_timestamp_seconds") == NOW.timestamp()


def test_pending_work_no_online_runner_can_take_is_counted_by_labels(db):
    make_runner("cpu", labels=["linux"])
    make_runner("gpu-box", labels=["linux", "gpu"], state=Runner.OFFLINE)
    make_execution(make_job(labels=["linux"]))
    make_execution(make_job(labels=["gpu", "linux"]))
    make_execution(make_job(labels=["linux", "gpu"]))
    values, _ = samples(scrape())
    unmatched = {
        dict(labels)["labels"]: v
        for (name, labels), v in values.items()
        if name == "croniq_executions_pending_unmatched"
    }
    assert unmatched == {"gpu,linux": 2}


# Counters, runners, jobs joined to their health, notification routes,
# pending executions, unmatched labels, lag, last tick, pending
# notifications, checks by state, maintenance in force, concurrency groups
# (their running counts only when there is one); and the calendars with
# their periods when a job has one.
SCRAPE_QUERIES = 14


def test_a_scrape_costs_the_same_few_queries_however_many_rows(db, django_assert_num_queries):
    channel = Channel.objects.create(name="ops", kind="webhook", url="https://hooks.example/x")

    def world_of(size):
        calendar = Calendar.objects.create(name=f"cal-{next(_names)}", weekdays=["mon", "wed"])
        CalendarPeriod.objects.create(
            calendar=calendar, start_date=NOW.date(), end_date=NOW.date(), label="closed"
        )
        for i in range(size):
            make_runner()
            # Distinct schedules and calendars: no two jobs share a period.
            job = make_job(
                singleton=True,
                schedule=f"{i % 60} {i // 60} * * *",
                calendar=calendar if i % 2 else None,
            )
            make_health(job, succeeded=3, failed=1, last_success_at=NOW)
            make_execution(job, Execution.SUCCEEDED)
            audit.increment("croniq_singleton_skips_total", job=job.name)
            make_notification(channel, job=job)
            rule = Rule.objects.create(name=f"rule-{next(_names)}", events=["job.failing"])
            rule.channels.add(channel)

    world_of(2)
    with django_assert_num_queries(SCRAPE_QUERIES):
        scrape()
    world_of(30)
    with django_assert_num_queries(SCRAPE_QUERIES):
        values, _ = samples(scrape())
    periods = [v for (name, _), v in values.items() if name == "croniq_job_period_seconds"]
    assert len(periods) == 32


@pytest.mark.filterwarnings("ignore:No directory at:UserWarning")
def test_the_metrics_endpoint_serves_croniq_series_next_to_django_prometheus(world, client):
    answer = client.get("/metrics")
    assert answer.status_code == 200
    text = answer.content.decode()
    _, types = samples(text)
    assert {name: types.get(name) for name in CONTRACT} == CONTRACT
    assert "django_http_requests_before_middlewares_total" in types
    assert text.count('croniq_executions_total{state="succeeded"} 3.0\n') == 1


# Notifications


def make_notification(channel, state=Notification.PENDING, **fields):
    event = Event.objects.create(name=fields.pop("name", "job.failing"), at=NOW)
    return Notification.objects.create(
        event=event, name=event.name, channel=channel, state=state, created_at=NOW, **fields
    )


def test_pending_notifications_are_counted_and_delivered_ones_are_not(db):
    channel = Channel.objects.create(name="ops-mail", kind="email", to=["ops@example.com"])
    for _ in range(3):
        make_notification(channel)
    make_notification(channel, Notification.DELIVERED)
    make_notification(channel, Notification.GIVEN_UP)
    values, _ = samples(scrape())
    assert value(values, "croniq_notifications_pending") == 3


def test_notification_counters_and_delivery_histogram_come_from_the_delivery_code(db):
    audit.increment(
        "croniq_notifications_total", channel="ops", event="job.failing", outcome="delivered"
    )
    audit.increment(
        "croniq_notifications_total", channel="ops", event="job.failing", outcome="delivered"
    )
    audit.increment(
        "croniq_notifications_total", channel="ops", event="job.missed", outcome="given_up"
    )
    audit.observe("croniq_notification_delivery_seconds", 0.02)
    audit.observe("croniq_notification_delivery_seconds", 4)
    values, types = samples(scrape())
    total = "croniq_notifications_total"
    assert value(values, total, channel="ops", event="job.failing", outcome="delivered") == 2
    assert value(values, total, channel="ops", event="job.missed", outcome="given_up") == 1
    assert types["croniq_notification_delivery_seconds"] == "histogram"
    bucket = "croniq_notification_delivery_seconds_bucket"
    assert value(values, bucket, le="0.025") == 1
    assert value(values, bucket, le="5.0") == 2
    assert value(values, "croniq_notification_delivery_seconds_sum") == pytest.approx(4.02)


def test_the_routes_rules_define_are_exported_at_zero_before_their_first_delivery(db):
    hook = Channel.objects.create(name="ops-hook", kind="webhook", url="https://hooks.example/x")
    off = Channel.objects.create(name="old", kind="webhook", url="https://x.example", enabled=False)
    rule = Rule.objects.create(name="failures", events=["job.failing", "job.missed"])
    rule.channels.add(hook, off)
    Rule.objects.create(name="disabled", events=["job.slow"], enabled=False).channels.add(hook)
    values, _ = samples(scrape())
    routes = {
        tuple(sorted(dict(labels).items()))
        for (name, labels), v in values.items()
        if name == "croniq_notifications_total" and v == 0
    }
    assert len(routes) == 6  # 2 events x 3 outcomes, on the enabled channel only
    total = "croniq_notifications_total"
    assert value(values, total, channel="ops-hook", event="job.missed", outcome="given_up") == 0
    assert ("channel", "old") not in {pair for route in routes for pair in route}
    assert ("event", "job.slow") not in {pair for route in routes for pair in route}


# Per-job series


def make_health(job, **fields):
    return JobHealth.objects.create(job=job, **fields)


def job_samples(values, name):
    return {dict(labels)["job"]: v for (sample, labels), v in values.items() if sample == name}


def test_last_success_and_failure_are_exported_only_for_jobs_that_had_them(db):
    make_health(make_job("steady"), last_success_at=NOW - timedelta(hours=1))
    make_health(
        make_job("broken"),
        last_failure_at=NOW - timedelta(minutes=5),
        failure_streak=4,
        failing_since=NOW - timedelta(hours=4),
    )
    make_job("new")
    values, _ = samples(scrape())
    success = job_samples(values, "croniq_job_last_success_timestamp_seconds")
    failure = job_samples(values, "croniq_job_last_failure_timestamp_seconds")
    assert success == {"steady": (NOW - timedelta(hours=1)).timestamp()}
    assert failure == {"broken": (NOW - timedelta(minutes=5)).timestamp()}


def test_run_counts_come_from_the_health_row_succeeded_and_failed_from_zero(db):
    make_health(make_job("busy"), succeeded=40, failed=3, timed_out=2, lost=1, skipped=5)
    make_job("new")
    values, _ = samples(scrape())
    runs = "croniq_job_runs_total"
    assert value(values, runs, job="busy", state="succeeded") == 40
    assert value(values, runs, job="busy", state="failed") == 3
    assert value(values, runs, job="busy", state="timed_out") == 2
    assert value(values, runs, job="busy", state="lost") == 1
    assert value(values, runs, job="busy", state="skipped") == 5

    def states(job):
        return {
            dict(labels)["state"]: v
            for (n, labels), v in values.items()
            if n == runs and ("job", job) in labels
        }

    # A state that never happened is left out, but for succeeded and failed:
    # `increase()` sees the first failure of a job only from a 0 before it.
    assert "cancelled" not in states("busy")
    assert states("new") == {"succeeded": 0, "failed": 0}


def test_the_period_is_the_time_between_the_next_two_fire_times(db):
    # NOW is Monday 2026-11-30 12:00 UTC.
    make_job("five-minutes", schedule="*/5 * * * *")
    make_job("weekdays", schedule="0 9 * * 1-5")
    make_job("every", schedule="@every 90s", next_run_at=NOW + timedelta(seconds=30))
    make_job("berlin", schedule="0 2 * * *", timezone="Europe/Berlin")
    gaps = Calendar.objects.create(name="mon-wed", weekdays=["mon", "wed"])
    make_job("calendar", schedule="0 9 * * *", calendar=gaps)
    values, _ = samples(scrape())
    assert job_samples(values, "croniq_job_period_seconds") == {
        "five-minutes": 300,
        "weekdays": 86400,
        "every": 90,
        "berlin": 86400,
        # The calendar allows Wednesday, then Monday: five days apart.
        "calendar": 5 * 86400,
    }


def test_jobs_that_do_not_fire_have_no_period(db):
    make_job("off", enabled=False)
    make_job("paused", paused_at=NOW - timedelta(hours=1))
    make_job("quarantined", error="schedule broke", error_at=NOW)
    make_job("never", schedule="0 0 30 2 *")  # 30 February
    make_job("unparsable", schedule="not a schedule")
    make_job("fires")
    values, _ = samples(scrape())
    assert job_samples(values, "croniq_job_period_seconds") == {"fires": 300}


def test_a_cached_period_follows_the_clock_past_the_next_fire_time(db):
    make_job("mon-wed", schedule="0 9 * * 1,3")
    monday, wednesday = NOW, NOW + timedelta(days=2)
    periods = [
        job_samples(samples(scrape(now))[0], "croniq_job_period_seconds")["mon-wed"]
        for now in (monday, wednesday, monday)
    ]
    # Monday noon: Wednesday 9:00, then Monday 9:00; Wednesday noon: Monday, Wednesday.
    assert periods == [5 * 86400, 2 * 86400, 5 * 86400]


def test_a_calendar_edit_changes_the_period_at_the_next_scrape(db):
    calendar = Calendar.objects.create(
        name="weekdays", weekdays=["mon", "tue", "wed", "thu", "fri"]
    )
    make_job("daily", schedule="0 9 * * *", calendar=calendar)
    before = job_samples(samples(scrape())[0], "croniq_job_period_seconds")["daily"]
    CalendarPeriod.objects.create(
        calendar=calendar,
        start_date=NOW.date() + timedelta(days=2),
        end_date=NOW.date() + timedelta(days=2),
    )
    after = job_samples(samples(scrape())[0], "croniq_job_period_seconds")["daily"]
    # Tuesday then Wednesday; with Wednesday closed, Tuesday then Thursday.
    assert (before, after) == (86400, 2 * 86400)


def test_the_no_recent_success_rule_reads_a_job_failing_for_two_periods(db):
    """The numbers the shipped CroniqJobNoRecentSuccess rule compares."""
    job = make_job("hourly", schedule="0 * * * *")
    make_health(job, last_success_at=NOW - timedelta(hours=2, minutes=30), failure_streak=2)
    values, _ = samples(scrape())
    age = NOW.timestamp() - value(values, "croniq_job_last_success_timestamp_seconds", job="hourly")
    assert age > 2 * value(values, "croniq_job_period_seconds", job="hourly")


@pytest.mark.django_db
def test_each_concurrency_group_shows_its_budget_and_what_runs_now():
    from scheduler.models import ConcurrencyGroup

    group = ConcurrencyGroup.objects.create(name="vendor-api", max_concurrent=3)
    ConcurrencyGroup.objects.create(name="idle", max_concurrent=1)
    job = Job.objects.create(
        name="sync", schedule="* * * * *", command="true", concurrency_group=group
    )
    for minute in range(2):
        at = NOW + timedelta(minutes=minute)
        Execution.objects.create(
            job=job, scheduled_for=at, run_after=at, created_at=at, state=Execution.RUNNING
        )
    values, types = samples(scrape())
    group_label = frozenset({("group", "vendor-api")})
    assert values[("croniq_concurrency_group_running", group_label)] == 2
    assert values[("croniq_concurrency_group_budget", group_label)] == 3
    assert values[("croniq_concurrency_group_running", frozenset({("group", "idle")}))] == 0
    assert types["croniq_concurrency_group_running"] == "gauge"
