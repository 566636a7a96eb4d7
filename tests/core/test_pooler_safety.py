"""Croniq's hot paths keep nothing in the server session, so they run behind
a transaction-mode pooler such as PgBouncer, which hands the server session
to another client between transactions (docs/design.md §16,
croniq_project/pooling.py).

Every statement a loop tick, the runner calls, apply and a notification
delivery send is recorded (`connection.execute_wrapper`) and checked: no
session-level advisory lock, PREPARE, LISTEN, cursor WITH HOLD, or `SET`
other than `SET LOCAL` inside a transaction. After each path the session
itself is read: no prepared statement (psycopg prepares at the protocol
level, which no statement text shows), held cursor, advisory lock or
LISTEN is left, and the only settings changed for the session are those
PgBouncer tracks per client (Django's `SET TIME ZONE` at connect when the
server's TimeZone is not UTC).
"""

import datetime as dt
import re
from dataclasses import dataclass, field
from io import StringIO
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from harness.hooks import SECRET, Hook
from notifications import delivery, routing
from notifications.models import Notification
from runners.models import RunnerToken
from scheduler.firing.loop import SchedulerLoop
from scheduler.models import Execution, Job, LogChunk
from scheduler.runs import lifecycle
from scheduler.runs.log_chunks import read_log
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory
from tests.notifications.conftest import make_channel, make_rule
from tests.notifications.factories import SECRET_VARIABLE
from tests.runners.conftest import Api

# The parameters PgBouncer keeps per client and sets again on whichever
# server connection the client gets (its startup-packet parameters).
POOLER_TRACKED = {
    "application_name",
    "client_encoding",
    "DateStyle",
    "standard_conforming_strings",
    "TimeZone",
}

SESSION_LOCK = re.compile(r"\bpg_(try_)?advisory_lock(_shared)?\s*\(", re.IGNORECASE)
SESSION_CONFIG = re.compile(r"\bset_config\s*\((?![^)]*,\s*true\s*\))", re.IGNORECASE)
PREPARE = re.compile(r"(PREPARE|EXECUTE|DEALLOCATE)\b", re.IGNORECASE)
LISTEN = re.compile(r"(UN)?LISTEN\b", re.IGNORECASE)
SESSION_SET = re.compile(r"(RESET|DISCARD)\b|SET\b(?!\s+(LOCAL|TRANSACTION|CONSTRAINTS)\b)", re.I)
SET_LOCAL = re.compile(r"SET\s+(LOCAL|TRANSACTION|CONSTRAINTS)\b", re.IGNORECASE)


def problem(sql: str, in_transaction: bool, withhold: bool) -> str | None:
    """Why `sql` would misbehave behind a transaction-mode pooler, or None."""
    if withhold:
        return "a cursor WITH HOLD outlives its transaction"
    if SESSION_LOCK.search(sql):
        return "a session-level advisory lock (use pg_advisory_xact_lock)"
    if SESSION_CONFIG.search(sql):
        return "set_config for the session (is_local must be true)"
    for statement in (part.strip() for part in sql.split(";")):
        if PREPARE.match(statement):
            return "a prepared statement"
        if LISTEN.match(statement):
            return "LISTEN on a pooled connection (core.db.listen_connection makes its own)"
        if SET_LOCAL.match(statement) and not in_transaction:
            return "SET LOCAL outside a transaction does nothing"
        if SESSION_SET.match(statement):
            return "a SET for the session (use SET LOCAL inside a transaction)"
    return None


@dataclass
class Recorder:
    """Every statement the test's connection sends, with what is wrong with it."""

    statements: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def __call__(self, execute: Any, sql: Any, params: Any, many: bool, context: Any) -> Any:
        conn = context["connection"]
        text = sql if isinstance(sql, str) else str(sql)
        in_transaction = conn.in_atomic_block or not conn.get_autocommit()
        withhold = getattr(context["cursor"].cursor, "withhold", False)
        self.statements.append(text)
        found = problem(text, in_transaction, withhold)
        if found:
            self.problems.append(f"{found}: {text[:200]}")
        return execute(sql, params, many, context)

    def sent(self, pattern: str) -> bool:
        return any(re.search(pattern, text, re.IGNORECASE) for text in self.statements)

    def check(self) -> None:
        """Nothing sent needs a session, and the session holds nothing."""
        assert self.statements
        assert not self.problems, "\n".join(self.problems)
        assert session_state() == {}


def session_state() -> dict[str, list[Any]]:
    """What the test connection's server session holds between transactions."""
    queries = {
        "prepared statements": "SELECT name, statement FROM pg_prepared_statements",
        "held cursors": "SELECT name, statement FROM pg_cursors",
        "listening": "SELECT * FROM pg_listening_channels()",
        "advisory locks": (
            "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        ),
        "session settings": (
            "SELECT name FROM pg_settings WHERE source = 'session' AND NOT name = ANY(%s)"
        ),
    }
    found = {}
    with connection.cursor() as cursor:
        for name, sql in queries.items():
            cursor.execute(sql, [sorted(POOLER_TRACKED)] if "%s" in sql else None)
            found[name] = cursor.fetchall()
    return {name: rows for name, rows in found.items() if rows}


@pytest.fixture
def recorder(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("a transaction-mode pooler fronts PostgreSQL")
    recording = Recorder()
    with connection.execute_wrapper(recording):
        yield recording


def test_a_loop_tick_that_fires_sends_nothing_that_needs_a_session(recorder):
    now = timezone.now()
    JobFactory(schedule="@every 1s", next_run_at=now)

    done = SchedulerLoop(clock=lambda: now).run_once()

    recorder.check()
    assert done.get("fired") == 1
    assert recorder.sent(r"INSERT INTO \"scheduler_execution\"")
    assert recorder.sent(r"FOR UPDATE SKIP LOCKED")


def test_runner_calls_send_nothing_that_needs_a_session(recorder, settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 1.0  # the hub's safety net looks within the wait
    now = timezone.now()
    execution = Execution.objects.create(
        job=JobFactory(next_run_at=None), scheduled_for=now, run_after=now, created_at=now
    )
    client = Api(RunnerToken.issue("pooled")[1])
    registered = client.post("/v1/runners/register", {"name": "r1", "session": "s1"})
    runner = registered.json()["runner_id"]
    poll = client.post(f"/v1/runners/{runner}/poll", {"session": "s1", "capacity": 1})
    [assignment] = poll.json()["executions"]
    lease = assignment["lease"]
    held = {"session": "s1", "executions": [{"id": execution.pk, "lease": lease}]}
    assert client.post(f"/v1/runners/{runner}/heartbeat", held).status_code == 200
    log = {"session": "s1", "lease": lease, "seq": 0, "data": "report: 120 rows\n"}
    assert client.post(f"/v1/executions/{execution.pk}/logs", log).status_code == 200
    outcome = {"session": "s1", "lease": lease, "exit_code": 0}
    assert client.post(f"/v1/executions/{execution.pk}/finish", outcome).status_code == 200
    # A poll that finds nothing waits on the process's hub, which claims for it.
    waited = client.post(f"/v1/runners/{runner}/poll", {"session": "s1", "wait": 0.3})

    text, _ = read_log(execution.pk, 0)  # outside a transaction

    recorder.check()
    assert waited.json()["executions"] == []
    assert text == "report: 120 rows\n"
    assert LogChunk.objects.filter(execution=execution).exists()
    assert recorder.sent(r"UPDATE \"scheduler_execution\"")


def test_apply_sends_nothing_that_needs_a_session(recorder, tmp_path):
    document = {"jobs": [{"name": "nightly", "schedule": "30 7 * * *", "command": "true"}]}
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump(document))

    call_command("apply", str(path), stdout=StringIO())

    recorder.check()
    assert Job.objects.filter(name="nightly").exists()


def test_notification_routing_and_delivery_send_nothing_that_needs_a_session(
    recorder, monkeypatch, settings
):
    monkeypatch.setenv(SECRET_VARIABLE, SECRET)
    settings.CRONIQ_NOTIFY_WORKERS = 1
    now = timezone.now()
    hook = Hook(now=lambda: now.timestamp())
    try:
        channel = make_channel(url=hook.url, secret=f"${{{SECRET_VARIABLE}}}")
        make_rule("failures", ["execution.failed"], [channel])
        failed = ExecutionFactory(
            job=JobFactory(next_run_at=None),
            state=Execution.RUNNING,
            runner=RunnerFactory(),
            lease=1,
            claimed_at=now - dt.timedelta(minutes=1),
        )
        with transaction.atomic():
            lifecycle.settle(failed, Execution.FAILED, now, exit_code=3)

        routed = routing.route_pending(now)
        delivered = delivery.deliver_due(now)
    finally:
        hook.close()

    recorder.check()
    assert routed >= 1 and delivered == 1
    assert Notification.objects.get().state == Notification.DELIVERED
    assert recorder.sent(r"pg_advisory_xact_lock")  # the routers' turn: per transaction


# -- the check itself ----------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "in_transaction", "expected"),
    [
        ("SELECT pg_advisory_lock(7)", True, "session-level advisory lock"),
        ("SELECT pg_try_advisory_lock(%s)", False, "session-level advisory lock"),
        ("SELECT pg_advisory_xact_lock(%s)", True, None),
        ("PREPARE claim AS SELECT 1", False, "prepared statement"),
        ("LISTEN croniq_work", False, "LISTEN"),
        ("SET statement_timeout = 1000", True, "SET for the session"),
        ("SET SESSION enable_sort = off", False, "SET for the session"),
        ("SELECT set_config('TimeZone', %s, false)", False, "set_config"),
        ("SELECT set_config('enable_sort', 'off', true)", True, None),
        ("SET LOCAL enable_sort = off", True, None),
        ("SET LOCAL enable_sort = off", False, "SET LOCAL outside a transaction"),
        ("SELECT 1; SET work_mem = '1GB'", True, "SET for the session"),
        ("SELECT * FROM scheduler_job WHERE name = 'SET x'", False, None),
    ],
)
def test_the_check_flags_what_a_pooler_would_break(sql, in_transaction, expected):
    found = problem(sql, in_transaction, withhold=False)
    assert (found is None) if expected is None else (expected in found), found


def test_the_recorder_sees_a_cursor_with_hold_and_a_session_set(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("a transaction-mode pooler fronts PostgreSQL")
    JobFactory.create_batch(2, next_run_at=dt.datetime(2026, 6, 1, tzinfo=dt.UTC))
    recording = Recorder()
    settings_dict = connection.settings_dict
    with connection.execute_wrapper(recording):
        # What QuerySet.iterator() did outside a transaction before
        # croniq_project.pooling turned server-side cursors off.
        settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = False
        try:
            assert len(list(Job.objects.values_list("pk").iterator(chunk_size=1))) == 2
        finally:
            settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = True
        with connection.cursor() as cursor:
            cursor.execute("SET work_mem = '8MB'")
    assert [p.split(":")[0] for p in recording.problems] == [
        "a cursor WITH HOLD outlives its transaction",
        "a SET for the session (use SET LOCAL inside a transaction)",
    ]
    assert session_state() == {"session settings": [("work_mem",)]}
    with connection.cursor() as cursor:
        cursor.execute("RESET work_mem")
