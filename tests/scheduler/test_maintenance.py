"""Maintenance mode at fixed instants: no claim inside a window (labelled
windows hold only their jobs), running work finishes, schedules keep
advancing with skipped or deferred-and-coalesced occurrences, the banner,
the gauge, the audit trail."""

import asyncio
import datetime as dt

import pytest
import time_machine
from django.urls import reverse
from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry

from audit.models import AuditEvent
from croniq_project.collector import CroniqCollector
from dispatch import claims, identity
from dispatch import leases as dispatch
from dispatch.hub import Waiter
from runners.models import RunnerToken
from scheduler.firing import ticks
from scheduler.models import Execution, Job, MaintenanceSwitch, MaintenanceWindow
from scheduler.runs import maintenance
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
END = T0 + dt.timedelta(hours=1)
ROOT = ("user", "root")


def at(minutes=0, seconds=0):
    return T0 + dt.timedelta(minutes=minutes, seconds=seconds)


@pytest.fixture
def issued():
    return RunnerToken.issue("maintenance-token")


@pytest.fixture
def runner(issued):
    return RunnerFactory(token=issued[0], labels=["linux", "gpu"], session="s1", capacity=4)


def window(labels=(), start=T0, end=END):
    return maintenance.add_window(start, end, start - dt.timedelta(days=1), ROOT, labels=labels)


def ready(labels=(), at_=T0):
    return ExecutionFactory(job=JobFactory(labels=list(labels)), scheduled_for=at_)


def claimed_ids(runner, now, capacity=4):
    return {e.pk for e in claims.claim(runner, runner.session, capacity, now)}


# Claims


def test_nothing_is_claimed_inside_a_window_and_all_of_it_after(runner):
    window()
    first, second = ready(), ready(["linux"])
    assert claimed_ids(runner, at(10)) == set()
    assert claimed_ids(runner, END) == {first.pk, second.pk}


def test_a_labelled_window_holds_its_jobs_and_others_are_still_claimed(runner):
    window(labels=["gpu"])
    held, free, unlabelled = ready(["gpu"]), ready(["linux"]), ready()
    assert claimed_ids(runner, at(10)) == {free.pk, unlabelled.pk}
    assert claimed_ids(runner, END) == {held.pk}


def test_the_switch_holds_every_claim_until_it_is_off(runner):
    execution = ready()
    maintenance.set_switch(True, T0, ROOT, reason="db upgrade")
    assert claimed_ids(runner, at(10)) == set()
    maintenance.set_switch(False, at(20), ROOT)
    assert claimed_ids(runner, at(20)) == {execution.pk}


def test_waiting_polls_are_served_nothing_a_window_holds(runner):
    window(labels=["gpu"])
    held, free = ready(["gpu"]), ready(["linux"])
    loop = asyncio.new_event_loop()
    try:
        waiter = Waiter(loop, runner.pk, runner.token, runner.session, None)
        [(_, handed)] = claims.serve_waiters([waiter], at(10), at(10, 1))
    finally:
        loop.close()
    assert [a["id"] for a in handed.assignments] == [free.pk]
    assert Execution.objects.get(pk=held.pk).state == Execution.PENDING


def test_a_claim_ahead_of_a_window_starting_before_its_instant_is_held(runner):
    window()
    ready(at_=T0)
    loop = asyncio.new_event_loop()
    try:
        waiter = Waiter(loop, runner.pk, runner.token, runner.session, None)
        assert claims.serve_waiters([waiter], at(0, -1), T0) == []
    finally:
        loop.close()


def test_running_work_finishes_inside_a_window(runner, issued):
    execution = ready(at_=at(-2))
    [running] = claims.claim(runner, runner.session, 1, at(-1))
    window()
    maintenance.set_switch(True, T0, ROOT)
    credential = identity.Credential(issued[1])
    state = dispatch.finish(credential, running.pk, "s1", running.lease, 0, "", False, at(5))
    assert state == Execution.SUCCEEDED
    assert Execution.objects.get(pk=execution.pk).state == Execution.SUCCEEDED


# The fire step


def test_occurrences_inside_a_window_are_recorded_skipped_and_the_schedule_advances():
    job = JobFactory(schedule="*/15 * * * *", next_run_at=T0)
    window()
    for minutes in (0, 15, 30, 45):
        ticks.trigger_due(at(minutes))
    job.refresh_from_db()
    assert job.next_run_at == END
    skipped = Execution.objects.filter(job=job).order_by("scheduled_for")
    assert [(e.scheduled_for, e.state) for e in skipped] == [
        (at(m), Execution.SKIPPED) for m in (0, 15, 30, 45)
    ]
    assert skipped[0].error.startswith("skipped: maintenance window")
    events = AuditEvent.objects.filter(action="execution.skipped")
    assert events.count() == 4
    assert all(e.data["reason"] == "maintenance" for e in events)
    assert job.health.skipped == 4

    assert ticks.trigger_due(END) == 1  # after the window: fired as usual
    assert Execution.objects.get(job=job, scheduled_for=END).state == Execution.PENDING


def test_a_labelled_window_skips_only_the_jobs_carrying_its_labels():
    gpu = JobFactory(labels=["gpu"], next_run_at=T0)
    linux = JobFactory(labels=["linux"], next_run_at=T0)
    window(labels=["gpu"])
    assert ticks.trigger_due(T0) == 1
    assert Execution.objects.get(job=gpu).state == Execution.SKIPPED
    assert Execution.objects.get(job=linux).state == Execution.PENDING


def test_deferred_occurrences_coalesce_into_one_run_at_the_end_of_the_window(runner):
    job = JobFactory(schedule="*/15 * * * *", next_run_at=T0, maintenance=Job.DEFER)
    window()
    for minutes in (0, 15, 30, 45):
        ticks.trigger_due(at(minutes))
    pending = Execution.objects.filter(job=job, state=Execution.PENDING)
    [deferred] = pending
    assert (deferred.scheduled_for, deferred.run_after) == (T0, END)
    coalesced = Execution.objects.filter(job=job, state=Execution.SKIPPED)
    assert coalesced.count() == 3
    assert all("coalesced into" in e.error for e in coalesced)
    assert AuditEvent.objects.filter(action="execution.deferred").count() == 1

    assert claimed_ids(runner, at(50)) == set()
    # No burst: the window's end brings one run, then the schedule as usual.
    assert claimed_ids(runner, END) == {deferred.pk}
    ticks.trigger_due(END)
    assert Execution.objects.filter(job=job, scheduled_for__gte=END).count() == 1


def test_a_deferred_occurrence_under_the_switch_runs_once_it_is_off(runner):
    job = JobFactory(schedule="*/15 * * * *", next_run_at=T0, maintenance=Job.DEFER)
    maintenance.set_switch(True, at(-1), ROOT)
    ticks.trigger_due(T0)
    ticks.trigger_due(at(15))
    [deferred] = Execution.objects.filter(job=job, state=Execution.PENDING)
    assert claimed_ids(runner, at(20)) == set()
    maintenance.set_switch(False, at(20), ROOT)
    assert claimed_ids(runner, at(20)) == {deferred.pk}


def test_a_deferred_singleton_with_a_live_run_coalesces_into_it():
    job = JobFactory(next_run_at=T0, singleton=True, maintenance=Job.DEFER)
    live = ExecutionFactory(job=job, scheduled_for=at(-5), state=Execution.RUNNING)
    window()
    ticks.trigger_due(T0)
    skipped = Execution.objects.get(job=job, scheduled_for=T0)
    assert skipped.state == Execution.SKIPPED
    assert f"coalesced into execution {live.pk} running" in skipped.error


# Changes are audited; a bad window changes nothing


def test_the_maintenance_a_firing_reads_is_one_read_while_there_is_none(django_assert_num_queries):
    with django_assert_num_queries(1):
        nothing = maintenance.load(T0)
    assert not nothing.switch_on and nothing.windows == ()

    ended = window(start=at(-60), end=at(-30))
    gpu = window(labels=["gpu"])
    maintenance.set_switch(True, T0, ROOT)
    found = maintenance.load(T0)
    assert found.switch_on
    assert [w.id for w in found.windows] == [gpu.pk]  # the ended one is left out
    assert found.windows[0].labels == frozenset({"gpu"}) and found.windows[0].end == END
    assert [w.id for w in maintenance.load(T0, since=at(-45)).windows] == [ended.pk, gpu.pk]


def test_switching_and_window_changes_are_audited():
    assert maintenance.set_switch(True, T0, ROOT, reason="db upgrade")
    assert not maintenance.set_switch(True, T0, ROOT, reason="db upgrade")  # no change
    maintenance.set_switch(False, at(5), ROOT)
    made = window(labels=["gpu"])
    maintenance.delete_window(made, at(6), ROOT)
    actions = list(AuditEvent.objects.order_by("pk").values_list("action", "actor_name"))
    assert actions == [
        ("maintenance.on", "root"),
        ("maintenance.off", "root"),
        ("maintenance.window_created", "root"),
        ("maintenance.window_deleted", "root"),
    ]
    created = AuditEvent.objects.get(action="maintenance.window_created")
    assert created.data["labels"] == ["gpu"]


def test_a_window_ending_before_it_starts_is_refused_and_nothing_is_stored():
    with pytest.raises(ValueError, match="^end: "):
        maintenance.add_window(END, T0, T0, ROOT)
    with pytest.raises(ValueError, match=r"^windows\[1\]\.end: "):
        maintenance.replace_windows(
            [{"start": T0, "end": END}, {"start": END, "end": T0}], T0, ROOT
        )
    assert not MaintenanceWindow.objects.exists()
    assert not AuditEvent.objects.exists()


def test_replacing_windows_keeps_equal_ones_and_leaves_ended_ones_alone():
    ended = window(start=T0 - dt.timedelta(hours=3), end=T0 - dt.timedelta(hours=2))
    kept = window()
    dropped = window(labels=["gpu"])
    later = {"start": END, "end": END + dt.timedelta(hours=1), "labels": ["linux"]}
    AuditEvent.objects.all().delete()
    maintenance.replace_windows([{"start": T0, "end": END}, later], T0, ROOT)
    remaining = set(MaintenanceWindow.objects.values_list("pk", flat=True))
    assert {ended.pk, kept.pk} <= remaining and dropped.pk not in remaining
    assert len(remaining) == 3
    actions = sorted(AuditEvent.objects.values_list("action", flat=True))
    assert actions == ["maintenance.window_created", "maintenance.window_deleted"]


# Banner and gauge


def gauge(now):
    registry = CollectorRegistry()
    registry.register(CroniqCollector(clock=lambda: now))
    text = generate_latest(registry).decode()
    [line] = [line for line in text.splitlines() if line.startswith("croniq_maintenance ")]
    return float(line.split()[1])


def test_the_gauge_is_1_while_a_maintenance_is_in_force_and_0_otherwise():
    assert gauge(T0) == 0.0  # exported from the first scrape
    window(labels=["gpu"])
    assert (gauge(at(-1)), gauge(T0), gauge(END)) == (0.0, 1.0, 0.0)
    maintenance.set_switch(True, END, ROOT)
    assert gauge(END) == 1.0


@pytest.fixture
def superuser_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.com", "pw"))
    return client


@pytest.mark.parametrize("page", ["admin:index", "dashboard:overview"])
def test_the_admin_and_the_dashboard_show_a_banner_while_a_window_is_active(superuser_client, page):
    MaintenanceWindow.objects.create(start=T0, end=END, reason="kernel upgrade")
    with time_machine.travel(at(-1), tick=False):
        assert "maintenance-banner" not in superuser_client.get(reverse(page)).content.decode()
    with time_machine.travel(at(10), tick=False):
        body = superuser_client.get(reverse(page)).content.decode()
    assert "Maintenance window until 2026-06-01 13:00:00 UTC" in body
    assert "kernel upgrade" in body


def test_the_admin_switch_page_turns_maintenance_on_audited(superuser_client):
    url = reverse("admin:scheduler_maintenanceswitch_changelist")
    page = superuser_client.get(url)
    assert page.status_code == 302
    answer = superuser_client.post(page.url, {"on": "on", "reason": "db upgrade"})
    assert answer.status_code == 302
    assert MaintenanceSwitch.objects.get().on
    event = AuditEvent.objects.get(action="maintenance.on")
    assert (event.actor_name, event.data) == ("root", {"reason": "db upgrade"})


def test_the_admin_refuses_a_window_ending_before_it_starts(superuser_client):
    answer = superuser_client.post(
        reverse("admin:scheduler_maintenancewindow_add"),
        {
            "start_0": "2026-06-01",
            "start_1": "13:00:00",
            "end_0": "2026-06-01",
            "end_1": "12:00:00",
            "labels": "[]",
            "reason": "",
        },
    )
    assert answer.status_code == 200
    assert "must be after start" in answer.content.decode()
    assert not MaintenanceWindow.objects.exists()
