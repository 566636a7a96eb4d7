"""`/api/v1/executions` (control.executions_api): the list newest first with
its filters and cursor, one execution, its log from a byte offset, cancel
and retry."""

import datetime as dt

import pytest
from django.db import connection

from audit.models import AuditEvent
from control.executions_api import ExecutionFilters, filtered
from control.paging import MAX_LIMIT
from scheduler.models import Execution, LogChunk
from tests.control.conftest import management_as
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory

T0 = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
M = dt.timedelta(minutes=1)


def ids(answer):
    return [item["id"] for item in answer.json()["items"]]


def test_an_execution_as_json(api):
    runner = RunnerFactory(name="rack-1")
    execution = ExecutionFactory(
        job=JobFactory(name="report"), state="failed", runner=runner, exit_code=3,
        error="boom", claimed_at=T0 + M, finished_at=T0 + 2 * M,
    )  # fmt: skip
    answer = api.get(f"executions/{execution.pk}")

    assert answer.status_code == 200
    assert answer.json() == {
        "id": execution.pk, "job": "report", "project": "default",
        "scheduled_for": "2026-06-01T12:00:00Z", "attempt": 1, "trigger": "schedule",
        "state": "failed", "runner": "rack-1",
        "pinned_to": "", "created_at": "2026-06-01T12:00:00Z", "claimed_at": "2026-12-01T09:01:00Z",
        "finished_at": "2026-12-01T09:02:00Z", "exit_code": 3, "error": "boom",
    }  # fmt: skip
    assert api.get("executions/999999").status_code == 404


def test_the_list_is_newest_first_and_pages_by_cursor(api):
    job = JobFactory()
    made = [ExecutionFactory(job=job, scheduled_for=T0 + n * M).pk for n in range(5)]

    first = api.get("executions", {"limit": 2})
    second = api.get("executions", {"limit": 2, "cursor": first.json()["next_cursor"]})
    ExecutionFactory(job=job, scheduled_for=T0 - M)  # newer id: behind the cursor
    third = api.get("executions", {"limit": 2, "cursor": second.json()["next_cursor"]})

    assert ids(first) + ids(second) + ids(third) == made[::-1]
    assert third.json()["next_cursor"] is None


def test_the_filters_select_by_job_state_trigger_and_scheduled_for(api):
    report, backup = JobFactory(name="report"), JobFactory(name="backup")
    a = ExecutionFactory(job=report, scheduled_for=T0, state="failed")
    b = ExecutionFactory(job=report, scheduled_for=T0 + M, trigger="manual")
    c = ExecutionFactory(job=backup, scheduled_for=T0 + 2 * M)

    assert ids(api.get("executions", {"job": "report"})) == [b.pk, a.pk]
    assert ids(api.get("executions", {"job": "nope"})) == []
    assert ids(api.get("executions", {"state": "failed"})) == [a.pk]
    assert ids(api.get("executions", {"trigger": "manual"})) == [b.pk]
    since = {"since": (T0 + M).isoformat(), "until": (T0 + 2 * M).isoformat()}
    assert ids(api.get("executions", since)) == [b.pk]
    assert ids(api.get("executions")) == [c.pk, b.pk, a.pk]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"state": "done"}, "state"),
        ({"trigger": "cron"}, "trigger"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-12-01T09:00:00+99:00"}, "until"),
        ({"limit": MAX_LIMIT + 1}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"cursor": "%%%"}, "cursor"),
    ],
)
def test_bad_filters_are_422_naming_them(api, query, field):
    answer = api.get("executions", query)
    assert answer.status_code == 422
    assert field in answer.json()["detail"]


def plan(queryset):
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + sql, params)
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return " ".join(str(row) for row in cursor.fetchall())


@pytest.mark.parametrize("query", [{}, {"job": "report"}, {"job": "report", "state": "failed"}])
def test_a_page_is_read_from_an_index_in_its_order_never_sorted(db, query):
    JobFactory(name="report")
    rows = filtered(ExecutionFilters(**query)).order_by("-id")[:51]
    shown = plan(rows)
    assert "TEMP B-TREE" not in shown  # SQLite: no sort step
    assert "Sort" not in shown and "Seq Scan" not in shown  # PostgreSQL


def test_the_log_reads_from_a_byte_offset_and_says_when_it_is_complete(api):
    execution = ExecutionFactory(state="running")
    LogChunk.objects.create(execution=execution, seq=1, data="héllo\n")
    LogChunk.objects.create(execution=execution, seq=2, data="world\n")

    whole = api.get(f"executions/{execution.pk}/log").json()
    assert whole == {"data": "héllo\nworld\n", "offset": 13, "complete": False}
    rest = api.get(f"executions/{execution.pk}/log", {"offset": 7}).json()
    assert rest == {"data": "world\n", "offset": 13, "complete": False}
    Execution.objects.filter(pk=execution.pk).update(state="succeeded")
    done = api.get(f"executions/{execution.pk}/log", {"offset": 13}).json()
    assert done == {"data": "", "offset": 13, "complete": True}
    for offset in (14, -1):
        refused = api.get(f"executions/{execution.pk}/log", {"offset": offset})
        assert refused.status_code == 422 and refused.json()["detail"].startswith("offset:")


def test_cancel_stops_a_pending_run_and_asks_a_running_one_to_stop(api):
    pending = ExecutionFactory()
    running = ExecutionFactory(scheduled_for=T0 + M, state="running")

    answer = api.post(f"executions/{pending.pk}/cancel")
    asked = api.post(f"executions/{running.pk}/cancel")

    assert answer.status_code == 200 and answer.json()["state"] == "cancelled"
    assert asked.status_code == 200 and asked.json()["state"] == "running"
    assert Execution.objects.get(pk=running.pk).cancel_requested_at is not None
    assert AuditEvent.objects.filter(action="execution.cancel").count() == 2
    assert api.post(f"executions/{pending.pk}/cancel").status_code == 200  # again: as it is


def test_cancelling_a_finished_run_is_409_and_changes_nothing(api):
    done = ExecutionFactory(state="succeeded", finished_at=T0)
    answer = api.post(f"executions/{done.pk}/cancel")
    assert answer.status_code == 409 and "succeeded" in answer.json()["detail"]
    assert Execution.objects.get(pk=done.pk).state == "succeeded"
    assert not AuditEvent.objects.exists()


def test_retry_creates_the_next_attempt(api):
    failed = ExecutionFactory(state="failed", finished_at=T0)
    answer = api.post(f"executions/{failed.pk}/retry")

    assert answer.status_code == 202
    new = Execution.objects.get(pk=answer.json()["id"])
    assert (new.attempt, new.trigger, new.state) == (2, "retry", "pending")
    assert answer.json()["attempt"] == 2
    assert AuditEvent.objects.filter(action="execution.retry").count() == 1


def test_retrying_a_live_run_is_409(api):
    pending = ExecutionFactory()
    answer = api.post(f"executions/{pending.pk}/retry")
    assert answer.status_code == 409
    assert Execution.objects.count() == 1


def test_reading_needs_executions_read_and_writing_executions_write(db):
    execution = ExecutionFactory(state="failed")
    reader = management_as("executions:read")
    assert reader.get("executions").status_code == 200
    refused = reader.post(f"executions/{execution.pk}/retry")
    assert refused.json() == {"detail": "needs scope executions:write"}
    assert management_as("jobs:read").get("executions").status_code == 403
    assert Execution.objects.count() == 1


def test_the_runner_protocol_s_execution_calls_are_still_answered_by_it(api):
    execution = ExecutionFactory(state="running")
    # An API key is not a runner token: the runner's logs call refuses it.
    answer = api.post(f"executions/{execution.pk}/logs", {"session": "s", "lease": 1,
                                                           "seq": 1, "data": "x"})  # fmt: skip
    assert answer.status_code == 401


@pytest.mark.parametrize(
    ("path", "query", "field"),
    [
        ("executions/99999999999999999999", {}, "execution_id"),
        ("executions/0/log", {}, "execution_id"),
        ("executions", {"since": "0001-01-01T00:00:00+14:00"}, "since"),
        ("executions", {"job": "a\x00b"}, "job"),
    ],
)
def test_values_the_database_cannot_hold_are_422_not_500(api, path, query, field):
    answer = api.get(path, query)
    assert answer.status_code == 422
    assert field in answer.json()["detail"]
