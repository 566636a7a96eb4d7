"""An execution's claim, run and finish spans (docs/design.md §15), exported
by the web process once the claim or the finish has committed, in the
execution's trace under its fire span; the run span is the one the job's
TRACEPARENT names."""

import datetime as dt

import pytest

from core import tracing
from dispatch import claims, identity
from dispatch import leases as dispatch
from runners.models import RunnerToken
from scheduler.models import Execution
from scheduler.runs import spans
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
DONE = NOW + dt.timedelta(seconds=5)


@pytest.fixture
def issued():
    return RunnerToken.issue("spans-token")


@pytest.fixture
def runner(issued):
    return RunnerFactory(name="build-01", token=issued[0], session="s1", capacity=10)


def claimed(runner, *jobs):
    for job in jobs:
        ExecutionFactory(job=job, scheduled_for=NOW)
    executions = claims.claim(runner, runner.session, len(jobs), NOW)
    claims.answer(runner, executions, NOW)  # the poll's answer, after the commit
    return executions


def named(exporter, name):
    return [span for span in exporter.get_finished_spans() if span.name == name]


def credential(issued):
    return identity.Credential(issued[1])


def test_a_claim_is_a_span_under_the_fire_span_naming_the_runner(runner, exported_spans):
    [execution] = claimed(runner, JobFactory(name="report"))
    context = tracing.parse(execution.traceparent)
    [claim] = named(exported_spans, "claim")
    assert claim.context.trace_id == context.trace_id
    assert claim.context.span_id not in (context.span_id, tracing.fire_span_id(context))
    assert claim.parent.span_id == tracing.fire_span_id(context)
    assert claim.start_time == tracing.nanoseconds(NOW)
    assert claim.attributes == {
        "croniq.job": "report",
        "croniq.execution.id": execution.pk,
        "croniq.execution.attempt": 1,
        "croniq.runner": "build-01",
        "croniq.execution.lease": 1,
    }


def test_the_assignment_carries_the_executions_trace_context(runner):
    [execution] = claimed(runner, JobFactory())
    assert claims.assignment(execution)["traceparent"] == execution.traceparent
    stored = Execution.objects.get(pk=execution.pk).traceparent
    assert tracing.parse(stored) is not None and stored == execution.traceparent


def test_a_success_exports_the_run_and_the_finish(runner, issued, exported_spans):
    [execution] = claimed(runner, JobFactory(name="report"))
    lease = execution.lease
    state = dispatch.finish(credential(issued), execution.pk, "s1", lease, 0, "", False, DONE)
    assert state == Execution.SUCCEEDED
    context = tracing.parse(execution.traceparent)
    [run] = named(exported_spans, "run")
    [finish] = named(exported_spans, "finish")
    # The run span is the job's parent: the id its TRACEPARENT names.
    assert (run.context.trace_id, run.context.span_id) == context
    assert run.parent.span_id == tracing.fire_span_id(context)
    assert (run.start_time, run.end_time) == (tracing.nanoseconds(NOW), tracing.nanoseconds(DONE))
    assert run.status.is_unset
    assert run.attributes == {
        "croniq.job": "report",
        "croniq.execution.id": execution.pk,
        "croniq.execution.attempt": 1,
        "croniq.runner": "build-01",
        "croniq.execution.state": "succeeded",
        "croniq.execution.exit_code": 0,
    }
    assert finish.context.trace_id == context.trace_id
    assert finish.parent.span_id == tracing.fire_span_id(context)
    assert finish.start_time == tracing.nanoseconds(DONE)
    assert finish.attributes == run.attributes


def test_a_failure_is_a_run_in_error_with_its_exit_code(runner, issued, exported_spans):
    [execution] = claimed(runner, JobFactory())
    dispatch.finish(credential(issued), execution.pk, "s1", execution.lease, 3, "boom", False, DONE)
    [run] = named(exported_spans, "run")
    assert run.status.description == "failed"
    assert not run.status.is_ok and not run.status.is_unset
    assert run.attributes["croniq.execution.exit_code"] == 3
    assert named(exported_spans, "finish")[0].attributes["croniq.execution.state"] == "failed"


def test_a_batch_finish_exports_each_run(runner, issued, exported_spans):
    executions = claimed(runner, JobFactory(), JobFactory(), JobFactory())
    reports = [(e.pk, e.lease, 0 if n else 1, "", False) for n, e in enumerate(executions)]
    answers = dispatch.finish_many(credential(issued), runner.pk, "s1", reports, DONE)
    assert [answer["status"] for answer in answers] == [200, 200, 200]
    runs = {span.attributes["croniq.execution.id"]: span for span in named(exported_spans, "run")}
    assert set(runs) == {e.pk for e in executions}
    for execution in executions:
        assert runs[execution.pk].context.span_id == tracing.parse(execution.traceparent).span_id
    assert len(named(exported_spans, "finish")) == 3


def test_a_repeated_finish_exports_nothing_more(runner, issued, exported_spans):
    [execution] = claimed(runner, JobFactory())
    for _ in range(2):
        dispatch.finish(credential(issued), execution.pk, "s1", execution.lease, 1, "", False, DONE)
    assert len(named(exported_spans, "run")) == 1


def test_a_run_stored_before_trace_contexts_has_no_spans(runner, issued, exported_spans):
    ExecutionFactory(job=JobFactory(), scheduled_for=NOW, traceparent="")
    [execution] = claims.claim(runner, "s1", 1, NOW)
    claims.answer(runner, [execution], NOW)
    dispatch.finish(credential(issued), execution.pk, "s1", execution.lease, 0, "", False, DONE)
    assert exported_spans.get_finished_spans() == ()


def test_with_tracing_off_a_finish_reads_nothing_more(settings, runner, django_assert_num_queries):
    settings.CRONIQ_OTLP_ENDPOINT = None
    tracing.reset()
    [execution] = claimed(runner, JobFactory())
    with django_assert_num_queries(0):
        spans.finished([execution.pk], DONE)
        spans.claimed("build-01", [execution], NOW)
