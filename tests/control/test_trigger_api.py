"""`POST /api/v1/jobs/{name}/trigger` (control.triggers_api, scheduler.firing.triggers):
idempotency keys, the pending queue's bound, declared env overrides and the
logical instant."""

import datetime as dt
import threading

import pytest
import time_machine
from django.db import connection, connections

from audit.models import AuditEvent
from dispatch.claims import assignment
from scheduler.firing import notifier
from scheduler.models import Execution, TriggerKey
from scheduler.runs import lifecycle
from tests.control.conftest import Management, management_as
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def trigger(api, name, body=None):
    return api.post(f"jobs/{name}/trigger", body)


def test_a_trigger_runs_the_job_now_audited_and_wakes_the_runners(
    api, django_capture_on_commit_callbacks
):
    job = JobFactory(name="report")
    with django_capture_on_commit_callbacks() as callbacks:
        answer = trigger(api, "report")

    assert answer.status_code == 202
    execution = Execution.objects.get()
    assert answer.json() == {
        "execution_id": execution.pk,
        "deduplicated": False,
        "execution_ids": [execution.pk],
    }
    assert (execution.job, execution.trigger, execution.state) == (job, "manual", "pending")
    assert execution.scheduled_for == execution.run_after == NOW
    assert notifier.new_work in callbacks
    event = AuditEvent.objects.get(action="job.run_now")
    assert event.actor_kind == "api_key" and event.actor_name.startswith("key-jobs:trigger")
    assert event.data["execution"] == execution.pk


def test_a_trigger_of_a_job_run_on_every_runner_answers_each_run(api):
    for name in ("web-b", "web-a"):
        RunnerFactory(name=name, labels=["linux"], last_seen_at=NOW)
    JobFactory(name="rotate-logs", labels=["linux"], run_on="all")

    answer = trigger(api, "rotate-logs").json()

    runs = Execution.objects.order_by("pinned_to")
    assert [run.pinned_to for run in runs] == ["web-a", "web-b"]
    assert answer["execution_ids"] == [run.pk for run in runs]
    assert answer["execution_id"] in answer["execution_ids"]


def test_a_trigger_needs_no_body(api):
    JobFactory(name="report")
    assert trigger(api, "report").status_code == 202


def test_the_same_key_answers_the_first_execution_and_creates_nothing(api):
    JobFactory(name="report")
    first = trigger(api, "report", {"idempotency_key": "deploy-42"})
    again = trigger(api, "report", {"idempotency_key": "deploy-42"})

    assert again.status_code == 202
    assert again.json() == {**first.json(), "deduplicated": True}
    assert Execution.objects.count() == 1
    assert AuditEvent.objects.filter(action="job.run_now").count() == 1


def test_a_key_is_per_job_and_may_be_reused_after_24_hours(api):
    JobFactory(name="report")
    JobFactory(name="backup")
    first = trigger(api, "report", {"idempotency_key": "k"}).json()
    other = trigger(api, "backup", {"idempotency_key": "k"}).json()
    with time_machine.travel(NOW + dt.timedelta(hours=23, minutes=59), tick=False):
        within = trigger(api, "report", {"idempotency_key": "k"}).json()
    with time_machine.travel(NOW + dt.timedelta(hours=24), tick=False):
        later = trigger(api, "report", {"idempotency_key": "k"}).json()

    assert other["deduplicated"] is False and other["execution_id"] != first["execution_id"]
    assert within == {**first, "deduplicated": True}
    assert later["deduplicated"] is False and later["execution_id"] != first["execution_id"]
    assert TriggerKey.objects.get(job__name="report").execution_id == later["execution_id"]


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent web processes need PostgreSQL; SQLite serialises writers")


def test_concurrent_triggers_with_one_key_create_one_execution(postgres_only):
    JobFactory(name="report")
    api = management_as("jobs:trigger")
    racers = 20
    barrier = threading.Barrier(racers)
    answers, errors = [], []

    def race():
        try:
            caller = Management(api.headers["authorization"].split()[1])
            barrier.wait()
            answers.append(trigger(caller, "report", {"idempotency_key": "once"}))
        except Exception as e:  # surfaced below: a racer must never fail
            errors.append(e)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=race) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert {a.status_code for a in answers} == {202}
    execution = Execution.objects.get()
    assert {a.json()["execution_id"] for a in answers} == {execution.pk}
    assert sorted(a.json()["deduplicated"] for a in answers) == [False] + [True] * 19


def test_a_full_queue_is_refused_with_retry_after_and_nothing_created(api, settings):
    settings.CRONIQ_TRIGGER_QUEUE_LIMIT = 2
    job = JobFactory(name="report")
    for minute in (1, 2):
        ExecutionFactory(job=job, scheduled_for=NOW - dt.timedelta(minutes=minute))
    ExecutionFactory(job=job, scheduled_for=NOW - dt.timedelta(minutes=3), state="running")

    answer = trigger(api, "report", {"idempotency_key": "k"})

    assert answer.status_code == 429
    assert int(answer["Retry-After"]) > 0
    assert "2 pending" in answer.json()["detail"]
    assert Execution.objects.count() == 3
    assert not TriggerKey.objects.exists()
    Execution.objects.filter(state="pending").update(state="running")
    assert trigger(api, "report", {"idempotency_key": "k"}).status_code == 202


def test_env_overrides_reach_the_assignment_and_the_retries(api):
    job = JobFactory(name="report", env={"REGION": "us", "DIR": "/srv"}, parameters=["REGION"])
    answer = trigger(api, "report", {"env": {"REGION": "eu"}})

    execution = Execution.objects.get(pk=answer.json()["execution_id"])
    assert execution.env == {"REGION": "eu"}
    assert assignment(execution)["env"] == {"REGION": "eu", "DIR": "/srv"}
    retry = lifecycle.next_attempt(execution, 2, NOW, NOW)
    assert retry.env == {"REGION": "eu"} and retry.job == job


def test_an_undeclared_env_key_is_refused_by_name(api):
    JobFactory(name="report", parameters=["REGION"])
    answer = trigger(api, "report", {"env": {"REGION": "eu", "PATH": "/tmp"}})

    assert answer.status_code == 422
    assert answer.json()["detail"].startswith("env.PATH: not a parameter of report")
    assert not Execution.objects.exists()


def test_scheduled_for_sets_the_logical_instant_up_to_a_day_ahead(api):
    JobFactory(name="report")
    past = NOW - dt.timedelta(days=3)
    ahead = NOW + dt.timedelta(hours=23)
    one = trigger(api, "report", {"scheduled_for": past.isoformat()}).json()["execution_id"]
    two = trigger(api, "report", {"scheduled_for": ahead.isoformat()}).json()["execution_id"]
    too_far = trigger(api, "report", {"scheduled_for": (NOW + dt.timedelta(days=2)).isoformat()})

    assert Execution.objects.get(pk=one).scheduled_for == past
    assert Execution.objects.get(pk=two).scheduled_for == ahead
    assert Execution.objects.get(pk=two).run_after == NOW  # it runs now
    assert too_far.status_code == 422
    assert too_far.json()["detail"].startswith("scheduled_for:")
    assert Execution.objects.count() == 2


def test_a_singleton_with_a_live_run_refuses_with_409(api):
    job = JobFactory(name="report", singleton=True)
    ExecutionFactory(job=job, state="running")
    answer = trigger(api, "report")
    assert answer.status_code == 409
    assert Execution.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"idempotency_key": "x" * 201}, "idempotency_key"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"env": ["REGION"]}, "env"),
        ({"env": {"REGION": 1}}, "env"),
        ({"scheduled_for": "2026-12-01T09:00:00+99:00"}, "scheduled_for"),
        ({"scheduled_for": "tomorrow"}, "scheduled_for"),
    ],
)
def test_bad_input_is_422_naming_the_field_and_creates_nothing(api, body, field):
    JobFactory(name="report", parameters=["REGION"])
    answer = trigger(api, "report", body)
    assert answer.status_code == 422
    assert field in answer.json()["detail"]
    assert not Execution.objects.exists() and not TriggerKey.objects.exists()


def test_an_unparsable_body_is_422(api):
    JobFactory(name="report")
    assert api.post("jobs/report/trigger", raw="{not json").status_code == 422


def test_an_unknown_job_is_404_and_a_key_without_the_scope_403(db):
    JobFactory(name="report")
    assert trigger(management_as("jobs:trigger"), "nope").status_code == 404
    refused = trigger(management_as("jobs:read", "executions:write"), "report")
    assert refused.status_code == 403
    assert refused.json() == {"detail": "needs scope jobs:trigger"}
    assert not Execution.objects.exists()


def test_a_name_no_job_can_have_is_404(api):
    assert trigger(api, "a%00b").status_code == 404
