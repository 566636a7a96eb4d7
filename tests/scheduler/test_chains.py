"""Chains: on_success and on_failure start other jobs when a run's outcome
is final, with trigger chain, the upstream's logical time and its id."""

import datetime as dt

import pytest
from django.core.exceptions import ValidationError

from audit.models import AuditEvent
from scheduler.apply import document as applyfile
from scheduler.apply.document import ApplyError
from scheduler.models import Execution, Job
from scheduler.runs import lifecycle
from scheduler.runs.chains import UPSTREAM_ENV
from tests.factories import ExecutionFactory, JobFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 2, 0, tzinfo=dt.UTC)
LATER = T0 + dt.timedelta(minutes=5)


def running(job, attempt=1):
    return ExecutionFactory(
        job=job, scheduled_for=T0, attempt=attempt, state=Execution.RUNNING, lease=1
    )


def chained(name):
    return list(Execution.objects.filter(job__name=name, trigger=Execution.CHAIN))


def test_a_success_starts_the_on_success_jobs_for_the_same_logical_time():
    report = JobFactory(name="report", schedule="0 0 1 1 *")
    JobFactory(name="cleanup", schedule="0 0 1 1 *")
    upstream = running(JobFactory(name="import", on_success=["report"], on_failure=["cleanup"]))
    lifecycle.settle(upstream, Execution.SUCCEEDED, LATER, exit_code=0)
    [run] = chained("report")
    assert (run.scheduled_for, run.state, run.upstream_id) == (T0, Execution.PENDING, upstream.pk)
    assert run.env == {UPSTREAM_ENV: str(upstream.pk)}
    assert run.job == report
    assert chained("cleanup") == []
    event = AuditEvent.objects.get(action="job.chained")
    assert event.data["execution"] == run.pk


def test_a_failure_starts_the_on_failure_jobs_only_once_its_retries_are_spent():
    JobFactory(name="page-oncall", schedule="0 0 1 1 *")
    JobFactory(name="report", schedule="0 0 1 1 *")
    job = JobFactory(name="import", retries=1, on_success=["report"], on_failure=["page-oncall"])
    first = running(job)
    retry = lifecycle.settle(first, Execution.FAILED, LATER, exit_code=1)
    assert retry is not None and chained("page-oncall") == []
    Execution.objects.filter(pk=retry.pk).update(state=Execution.RUNNING, lease=1)
    retry.refresh_from_db()
    lifecycle.settle(retry, Execution.FAILED, LATER, exit_code=1)
    assert len(chained("page-oncall")) == 1 and chained("report") == []


def test_a_chained_job_with_its_own_run_of_that_instant_takes_the_next_attempt():
    report = JobFactory(name="report", schedule="0 2 * * *")
    ExecutionFactory(job=report, scheduled_for=T0, state=Execution.SUCCEEDED)
    upstream = running(JobFactory(name="import", on_success=["report"]))
    lifecycle.settle(upstream, Execution.SUCCEEDED, LATER, exit_code=0)
    [run] = chained("report")
    assert run.attempt == 2


def test_a_disabled_downstream_job_is_not_started_and_the_skip_is_audited():
    JobFactory(name="report", enabled=False)
    upstream = running(JobFactory(name="import", on_success=["report"]))
    lifecycle.settle(upstream, Execution.SUCCEEDED, LATER, exit_code=0)
    assert chained("report") == []
    assert AuditEvent.objects.get(action="job.chained").data["skipped"] == "disabled"


def test_a_singleton_downstream_with_a_live_run_is_refused_and_audited():
    report = JobFactory(name="report", singleton=True)
    ExecutionFactory(job=report, scheduled_for=T0 - dt.timedelta(hours=1), state=Execution.RUNNING)
    upstream = running(JobFactory(name="import", on_success=["report"]))
    lifecycle.settle(upstream, Execution.SUCCEEDED, LATER, exit_code=0)
    assert chained("report") == []
    assert "singleton" in AuditEvent.objects.get(action="job.chained").data["skipped"]


def job_item(name, **fields):
    return {"name": name, "schedule": "0 2 * * *", "command": "true", **fields}


def test_apply_takes_chains_to_jobs_later_in_the_file():
    applyfile.apply(
        {"jobs": [job_item("import", on_success=["report"]), job_item("report")]}, now=T0
    )
    assert Job.objects.get(name="import").on_success == ["report"]


@pytest.mark.parametrize(
    "jobs, error",
    [
        ([job_item("import", on_success=["nope"])], "jobs[0].on_success: no job named 'nope'"),
        (
            [job_item("a", on_success=["b"]), job_item("b", on_failure=["a"])],
            "jobs[0].on_success: the chain forms a cycle: a -> b -> a",
        ),
        ([job_item("a", on_success=["a"])], "jobs[0].on_success: the chain forms a cycle: a -> a"),
        ([job_item("a", on_failure="b")], "jobs[0].on_failure"),
    ],
)
def test_apply_refuses_an_unknown_job_or_a_cycle_naming_it(jobs, error):
    with pytest.raises(ApplyError) as refused:
        applyfile.apply({"jobs": jobs}, now=T0)
    assert any(e.startswith(error) for e in refused.value.errors), refused.value.errors
    assert not Job.objects.exists()


def test_saving_a_job_that_closes_a_cycle_is_refused_naming_the_cycle():
    JobFactory(name="report", on_success=["import"])
    job = JobFactory(name="import")
    job.on_success = ["report"]
    with pytest.raises(ValidationError) as refused:
        job.full_clean()
    assert refused.value.message_dict["on_success"] == [
        "the chain forms a cycle: import -> report -> import"
    ]
