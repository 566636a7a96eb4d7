"""Every execution's trace context and its fire span (docs/design.md §15):
drawn when it is created, continued by its retries, each runner's run of a
run-on-all occurrence in a trace of its own; the fire span exported at the
commit of whatever created it."""

import datetime as dt
import re

import pytest

from core import tracing
from scheduler.firing import backfill, ticks
from scheduler.models import Execution, Job
from scheduler.runs import lifecycle, operations, spans
from scheduler.triage import dead_letter_actions
from scheduler.triage.dead_letters import DeadLetter
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
LATER = T0 + dt.timedelta(minutes=1)
W3C = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01")
ACTOR = ("user", "ops")


def trace_of(execution):
    return tracing.parse(execution.traceparent).trace_id


def committed(capture):
    """Run what was to happen at the commit, once (`execute=True` would run
    the callbacks those register too: new-work hints that register more)."""

    class Commit:
        def __enter__(self):
            self.context = capture(execute=False)
            self.callbacks = self.context.__enter__()

        def __exit__(self, *exc):
            self.context.__exit__(*exc)
            if exc[0] is None:
                for callback in list(self.callbacks):
                    callback()

    return Commit()


def fire_spans(exporter):
    return [span for span in exporter.get_finished_spans() if span.name == "fire"]


def running(job, attempt=1):
    return ExecutionFactory(
        job=job, attempt=attempt, state=Execution.RUNNING, lease=1, claimed_at=T0
    )


# -- trace contexts ----------------------------------------------------------


def test_every_execution_the_loop_fires_has_a_trace_of_its_own():
    first, second = JobFactory(next_run_at=T0), JobFactory(next_run_at=T0)
    assert ticks.trigger_due(T0) == 2
    runs = [Execution.objects.get(job=job) for job in (first, second)]
    assert all(W3C.fullmatch(run.traceparent) for run in runs)
    assert trace_of(runs[0]) != trace_of(runs[1])


def test_each_runner_of_a_run_on_all_occurrence_runs_in_a_trace_of_its_own():
    for name in ("web-a", "web-b"):
        RunnerFactory(name=name, labels=["linux"], last_seen_at=T0)
    job = JobFactory(labels=["linux"], run_on=Job.ALL, next_run_at=T0)
    assert ticks.trigger_due(T0) == 2
    runs = Execution.objects.filter(job=job)
    assert len({trace_of(run) for run in runs}) == 2


def test_a_retry_continues_its_runs_trace_with_a_span_of_its_own():
    first = running(JobFactory(retries=2, retry_backoff=10))
    retry = lifecycle.settle(first, Execution.FAILED, LATER, exit_code=1)
    assert W3C.fullmatch(retry.traceparent)
    assert trace_of(retry) == trace_of(first)
    assert retry.traceparent != first.traceparent


def test_an_operators_retry_and_a_replay_stay_in_the_trace():
    job = JobFactory(retries=0)
    first = running(job)
    lifecycle.settle(first, Execution.FAILED, LATER, exit_code=1)
    again = operations.retry(first, LATER, ACTOR)
    assert trace_of(again) == trace_of(first)
    replayed = dead_letter_actions.replay(DeadLetter.objects.get(), LATER, ACTOR)
    assert trace_of(replayed) == trace_of(first)
    assert len({first.traceparent, again.traceparent, replayed.traceparent}) == 3


def test_a_run_stored_before_trace_contexts_retries_in_a_new_trace():
    first = running(JobFactory(retries=1, retry_backoff=10))
    Execution.objects.filter(pk=first.pk).update(traceparent="")
    first.refresh_from_db()
    retry = lifecycle.settle(first, Execution.FAILED, LATER, exit_code=1)
    assert W3C.fullmatch(retry.traceparent)


# -- fire spans ---------------------------------------------------------------


def test_the_fire_step_exports_each_executions_fire_span_at_its_commit(
    exported_spans, django_capture_on_commit_callbacks
):
    job = JobFactory(name="report", next_run_at=T0)
    with django_capture_on_commit_callbacks(execute=False) as committing:
        ticks.trigger_due(T0)
    assert fire_spans(exported_spans) == []  # nothing before the commit
    for callback in list(committing):
        callback()
    execution = Execution.objects.get(job=job)
    context = tracing.parse(execution.traceparent)
    [fire] = fire_spans(exported_spans)
    assert fire.context.trace_id == context.trace_id
    assert fire.context.span_id == tracing.fire_span_id(context)
    assert fire.parent is None  # the root of the run's trace
    assert fire.start_time == tracing.nanoseconds(execution.created_at)
    assert fire.end_time >= fire.start_time
    assert fire.attributes == {
        "croniq.job": "report",
        "croniq.execution.id": execution.pk,
        "croniq.execution.attempt": 1,
        "croniq.execution.trigger": "schedule",
        "croniq.execution.state": "pending",
        "croniq.execution.scheduled_for": T0.isoformat(),
    }


def test_a_rolled_back_fire_exports_nothing(exported_spans, django_capture_on_commit_callbacks):
    JobFactory(next_run_at=T0)
    with django_capture_on_commit_callbacks(execute=False):
        ticks.trigger_due(T0)  # its callbacks never run: as after a rollback
    assert exported_spans.get_finished_spans() == ()


def test_a_retrys_fire_span_is_a_child_of_the_attempt_before_it(
    exported_spans, django_capture_on_commit_callbacks
):
    first = running(JobFactory(retries=1, retry_backoff=10))
    with committed(django_capture_on_commit_callbacks):
        retry = lifecycle.settle(first, Execution.FAILED, LATER, exit_code=1)
    [fire] = fire_spans(exported_spans)
    assert fire.attributes["croniq.execution.id"] == retry.pk
    assert fire.attributes["croniq.execution.trigger"] == "retry"
    assert fire.context.trace_id == trace_of(first)
    assert fire.parent.span_id == tracing.fire_span_id(tracing.parse(first.traceparent))


@pytest.mark.parametrize("how", ["run_now", "backfill"])
def test_runs_made_outside_the_loop_export_their_fire_span(
    how, exported_spans, django_capture_on_commit_callbacks
):
    job = JobFactory(schedule="0 * * * *")
    with committed(django_capture_on_commit_callbacks):
        if how == "run_now":
            operations.run_now(job, T0, ACTOR)
        else:
            backfill.backfill(job, T0 - dt.timedelta(hours=2), T0, T0, ACTOR)
    made = sorted(Execution.objects.filter(job=job).values_list("pk", flat=True))
    assert made
    fired = sorted(span.attributes["croniq.execution.id"] for span in fire_spans(exported_spans))
    assert fired == made


def test_with_tracing_off_creating_a_run_reads_and_registers_nothing_more(
    settings, django_capture_on_commit_callbacks, django_assert_num_queries
):
    settings.CRONIQ_OTLP_ENDPOINT = None
    tracing.reset()
    retry = running(JobFactory(retries=1), attempt=2)
    with django_capture_on_commit_callbacks() as committing, django_assert_num_queries(0):
        spans.fired([retry])
    assert committing == []
