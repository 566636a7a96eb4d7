"""Each audit event names the project of the row it is about, as it was
when the event was written: a job's, an execution's job's, a dead letter's
execution's job's; "" for a row of no project. A run's event reads its
job's project in its own INSERT, without a query more."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

import audit
from audit.models import AuditEvent
from control.models import ApiKey
from projects.models import Project
from scheduler.models import Execution
from scheduler.triage.dead_letters import DeadLetter
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory
from tests.migrations import migrate

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def payroll_job(db):
    Project.objects.create(name="payroll")
    return JobFactory(name="salaries", project="payroll")


def project_of_event(action):
    return AuditEvent.objects.get(action=action).project


def test_an_event_of_a_job_names_the_jobs_project(payroll_job):
    audit.record("job.paused", target=payroll_job, at=NOW)
    assert project_of_event("job.paused") == "payroll"


def test_an_event_of_a_run_reads_its_jobs_project_in_the_insert(
    payroll_job, django_assert_num_queries
):
    execution = Execution.objects.get(pk=ExecutionFactory(job=payroll_job).pk)  # job not loaded
    with django_assert_num_queries(1):
        audit.record("execution.retry", target=execution, at=NOW)
    assert project_of_event("execution.retry") == "payroll"


def test_an_event_of_a_run_whose_job_is_loaded_reads_it_there(payroll_job):
    execution = Execution.objects.select_related("job").get(pk=ExecutionFactory(job=payroll_job).pk)
    audit.record("execution.reaped", target=execution, at=NOW)
    assert project_of_event("execution.reaped") == "payroll"


def test_an_event_of_a_dead_letter_names_its_jobs_project(payroll_job):
    execution = ExecutionFactory(job=payroll_job, state=Execution.FAILED)
    letter = DeadLetter.objects.create(execution=execution, reason="failed", landed_at=NOW)
    audit.record("deadletter.discard", target=DeadLetter.objects.get(pk=letter.pk), at=NOW)
    assert project_of_event("deadletter.discard") == "payroll"


def test_events_of_rows_of_no_project_name_none(db):
    key, _ = ApiKey.issue("ci", ["jobs:read"])
    audit.record("runner.drained", target=RunnerFactory(), at=NOW)
    audit.record("apikey.created", target=key, at=NOW)
    audit.record("maintenance.on", at=NOW)
    assert set(AuditEvent.objects.values_list("project", flat=True)) == {""}


def test_a_run_deleted_before_its_event_is_written_names_no_project(payroll_job):
    execution = Execution.objects.get(pk=ExecutionFactory(job=payroll_job).pk)
    Execution.objects.filter(pk=execution.pk).delete()
    audit.record("execution.retry", target=execution, at=NOW)
    assert project_of_event("execution.retry") == ""


def test_a_bound_keys_events_name_its_project(payroll_job):
    key, _ = ApiKey.issue("payroll-ci", ["jobs:read"], project="payroll")
    audit.record("apikey.created", target=key, at=NOW)
    assert project_of_event("apikey.created") == "payroll"


def test_events_written_together_name_their_projects(payroll_job):
    # As apply writes its events: a few statements for thousands of rows.
    other = JobFactory(name="cleanup")
    execution = Execution.objects.get(pk=ExecutionFactory(job=payroll_job).pk)
    audit.recording.record_many(
        audit.recording.event_of(action, target=target, at=NOW)
        for action, target in [("job.changed", other), ("execution.retry", execution)]
    )
    assert project_of_event("job.changed") == "default"
    assert project_of_event("execution.retry") == "payroll"


@pytest.mark.django_db(transaction=True)
def test_events_written_before_projects_name_none():
    old = migrate([("audit", "0006_alter_auditevent_actor_kind")])
    try:
        old.get_model("audit", "AuditEvent").objects.create(at=NOW, action="job.paused")
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
        assert project_of_event("job.paused") == ""
        with connection.cursor() as cursor:
            indexes = connection.introspection.get_constraints(cursor, "audit_auditevent")
        assert "audit_project_id" in indexes
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
