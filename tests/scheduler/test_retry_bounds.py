"""A job's retry policy is bounded (retries at most 100, retry_backoff at
most a day) wherever it is written, and the wait before a retry is capped
at a day when it is computed, so a row stored before the bounds still
settles."""

import datetime as dt

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.urls import reverse

from runners.models import RunnerToken
from scheduler.apply.document import ApplyError, apply
from scheduler.models import MAX_RETRY_DELAY, Execution, Job
from scheduler.runs import lifecycle
from tests.admin_forms import job_form
from tests.control.keyed_client import KeyedClient
from tests.factories import ExecutionFactory, JobFactory
from tests.runners.conftest import Api

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
A_DAY = dt.timedelta(seconds=MAX_RETRY_DELAY)
# Over the bounds, and the most PostgreSQL's integer columns hold (SQLite
# took 10**12): a row stored before the bounds existed.
STORED = 2**31 - 1
JOB = {"name": "sync", "schedule": "0 * * * *", "command": "sync.sh"}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def failed_attempts(job, count):
    """`count` failed attempts of one instant; the last one."""
    for attempt in range(1, count + 1):
        last = ExecutionFactory(
            job=job, scheduled_for=NOW, attempt=attempt, state=Execution.FAILED, finished_at=NOW
        )
    return last


def test_the_backoff_doubles_below_a_day():
    job = JobFactory(retries=10, retry_backoff=30)
    assert lifecycle.retry_delay(failed_attempts(job, 3)) == dt.timedelta(seconds=120)


def test_the_wait_before_a_retry_is_at_most_a_day():
    job = JobFactory(retries=100, retry_backoff=30)
    # 30 s doubled 59 times overflows timedelta; the wait stops at a day.
    assert lifecycle.retry_delay(failed_attempts(job, 60)) == A_DAY


def test_a_backoff_stored_over_the_bound_waits_a_day():
    job = JobFactory(retries=3)
    Job.objects.filter(pk=job.pk).update(retry_backoff=STORED)
    job.refresh_from_db()
    assert lifecycle.retry_delay(failed_attempts(job, 1)) == A_DAY


def test_finishing_a_run_of_a_job_stored_over_the_bounds_settles_it():
    """Through the runner API: the finish answers 200, the run leaves
    `running` (its slot is free) and its retry waits a day. Its instant
    failed 20 times before: the uncapped wait overflowed."""
    job = JobFactory(labels=["linux"], retries=1)
    Job.objects.filter(pk=job.pk).update(retries=STORED, retry_backoff=STORED)
    failed_attempts(job, 20)
    ExecutionFactory(job=job, scheduled_for=NOW, attempt=21)
    _, secret = RunnerToken.issue("t")
    runner_api = Api(secret)
    runner = runner_api.post(
        "/v1/runners/register", {"name": "r1", "labels": ["linux"], "session": "s1"}
    ).json()["runner_id"]
    held = runner_api.post(f"/v1/runners/{runner}/poll", {"session": "s1"}).json()["executions"][0]

    finish = {"session": "s1", "lease": held["lease"], "exit_code": 1}
    answer = runner_api.post(f"/v1/executions/{held['id']}/finish", finish)

    assert answer.status_code == 200, answer.content
    assert Execution.objects.get(pk=held["id"]).state == Execution.FAILED
    retry = Execution.objects.get(job=job, attempt=22)
    assert (retry.state, retry.run_after) == (Execution.PENDING, NOW + A_DAY)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("retries", 101, "at most 100 retries (got 101)"),
        ("retry_backoff", 86401, "at most 86400 seconds, a day (got 86401)"),
    ],
)
def test_a_retry_policy_over_its_bound_is_refused_naming_the_field(field, value, message):
    job = JobFactory.build(**{field: value})
    with pytest.raises(ValidationError) as refused:
        job.full_clean()
    assert refused.value.message_dict[field] == [message]


def test_the_bounds_themselves_are_accepted():
    JobFactory.build(retries=100, retry_backoff=86400).full_clean()


def test_apply_refuses_a_retry_policy_over_its_bounds_naming_the_item():
    document = {"jobs": [{**JOB, "retries": 101, "retry_backoff": 10**12}]}
    with pytest.raises(ApplyError) as refused:
        apply(document, now=NOW)
    errors = "\n".join(refused.value.errors)
    assert "jobs[0].retries: at most 100 retries (got 101)" in errors
    assert "jobs[0].retry_backoff: at most 86400 seconds, a day" in errors
    assert not Job.objects.exists()


def test_the_api_answers_422_naming_the_field_and_stores_nothing(client):
    api = KeyedClient(client, ["jobs:read", "jobs:write"])
    answer = api.post("jobs", {**JOB, "retry_backoff": 10**12})
    assert answer.status_code == 422, answer.content
    assert "retry_backoff: at most 86400 seconds" in answer.json()["detail"]
    assert not Job.objects.exists()


def test_the_admin_refuses_too_many_retries(client, django_user_model):
    user = django_user_model.objects.create_superuser("ops", "ops@example.com", "pw")
    client.force_login(user)
    answer = client.post(reverse("admin:scheduler_job_add"), job_form(retries="101"))
    assert answer.status_code == 200
    assert "at most 100 retries (got 101)" in answer.content.decode()
    assert not Job.objects.exists()
