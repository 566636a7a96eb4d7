"""rows_by_id: retention's statements over a batch of ids, in plain SQL,
touch exactly the rows named (and only those), on both backends."""

import datetime as dt

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from scheduler.housekeeping import rows_by_id
from scheduler.models import Execution
from scheduler.runs.log_chunks import LogChunk
from tests.factories import ExecutionFactory, JobFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 2, 30, tzinfo=dt.UTC)


def runs(count, **fields):
    job = JobFactory()
    return [
        ExecutionFactory(job=job, scheduled_for=T0 + dt.timedelta(minutes=i), **fields)
        for i in range(count)
    ]


def test_ids_where_returns_only_the_named_rows_in_the_given_states():
    done = runs(3, state=Execution.SUCCEEDED)
    live = runs(2, state=Execution.PENDING)
    named = [done[0].pk, done[1].pk, live[0].pk, 10**9]

    assert sorted(rows_by_id.ids_where(Execution, "id", named)) == sorted(named[:3])
    assert sorted(rows_by_id.ids_where(Execution, "id", named, states=Execution.FINAL_STATES)) == [
        done[0].pk,
        done[1].pk,
    ]


def test_ids_where_follows_a_foreign_key_by_its_field_name():
    upstream = runs(2, state=Execution.SUCCEEDED)
    chained = ExecutionFactory(upstream=upstream[0], state=Execution.PENDING)
    ExecutionFactory(upstream=None, state=Execution.PENDING)

    assert rows_by_id.ids_where(Execution, "upstream", [u.pk for u in upstream]) == [chained.pk]


def test_ids_where_locks_the_rows_it_returns_where_the_database_can():
    (run,) = runs(1, state=Execution.SUCCEEDED)
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        assert rows_by_id.ids_where(Execution, "id", [run.pk], lock=True) == [run.pk]
    locked = "FOR UPDATE SKIP LOCKED" in queries.captured_queries[-2]["sql"]
    assert locked == connection.features.has_select_for_update_skip_locked


def test_delete_where_deletes_the_named_rows_and_counts_them():
    mine, others = runs(2, state=Execution.SUCCEEDED), runs(1, state=Execution.SUCCEEDED)
    for run in mine + others:
        LogChunk.objects.create(execution=run, seq=0, data="x", created_at=T0)

    assert rows_by_id.delete_where(LogChunk, "execution", [run.pk for run in mine]) == 2
    assert list(LogChunk.objects.values_list("execution_id", flat=True)) == [others[0].pk]


def test_clear_where_sets_the_field_to_null_by_itself_or_by_another_field():
    upstream = runs(1, state=Execution.SUCCEEDED)[0]
    first = ExecutionFactory(upstream=upstream, state=Execution.PENDING)
    second = ExecutionFactory(upstream=upstream, state=Execution.PENDING)

    assert rows_by_id.clear_where(Execution, "upstream", [first.pk], by="id") == 1
    first.refresh_from_db(), second.refresh_from_db()
    assert (first.upstream_id, second.upstream_id) == (None, upstream.pk)

    assert rows_by_id.clear_where(Execution, "upstream", [upstream.pk]) == 1
    second.refresh_from_db()
    assert second.upstream_id is None


def test_an_empty_batch_sends_no_statement():
    with CaptureQueriesContext(connection) as queries:
        assert rows_by_id.ids_where(Execution, "id", []) == []
        assert rows_by_id.delete_where(Execution, "id", []) == 0
        assert rows_by_id.clear_where(Execution, "upstream", []) == 0
    assert queries.captured_queries == []


def test_on_postgresql_the_ids_go_as_one_array_parameter():
    """A thousand parameters cost PostgreSQL about 3 ms a statement to bind
    and plan; SQLite takes them as they are."""
    done = runs(3, state=Execution.SUCCEEDED)
    with CaptureQueriesContext(connection) as queries:
        rows_by_id.delete_where(Execution, "id", [run.pk for run in done])
    (statement,) = [q["sql"] for q in queries.captured_queries if "DELETE" in q["sql"]]
    if connection.vendor == "postgresql":
        assert "= ANY(" in statement
    else:
        assert statement.count("IN (") == 1
    assert not Execution.objects.exists()
