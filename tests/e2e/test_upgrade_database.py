"""A database the previous release made and used, upgraded by the current
code's `migrate`, then served by the current server.

The previous release's own `migrate` makes the database and a script run
inside its tree (previous_release_rows.py) fills every table of every Croniq
app, checking by introspection of that release's models that none is empty.
After the current `migrate` every row is still there, unchanged but for what
a migration says it changes; then the current web server and scheduler loop
run on it: the loop fires a job that was due, the management API answers the
previous release's API key, and an agent holding its runner token runs the
job.
"""

import json
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
import requests

from harness.previous_release import previous_migrated_database, previous_python, release_tree
from harness.processes import (
    ROOT,
    drop_database,
    manage,
    process_env,
    query,
    start_agent,
    start_web_and_loop,
    wait_for,
)

pytestmark = pytest.mark.e2e

ROWS = Path(__file__).with_name("previous_release_rows.py")
FIRES = Path(__file__).with_name("upcoming_fires.py")


@pytest.fixture
def previous_database(tmp_path):
    """A database of the previous release's schema, with its rows, and what
    the script that wrote them reports."""
    release_tree()  # built outside the timed part
    db = previous_migrated_database(tmp_path)
    try:
        result = previous_python(db, ROWS)
        assert result.returncode == 0, result.stderr
        [line] = [line for line in result.stdout.splitlines() if line.startswith("RESULT:")]
        yield db, json.loads(line.removeprefix("RESULT:"))
    finally:
        drop_database(db)


def rows(db: str, table: str, key: str) -> dict[object, dict[str, object]]:
    """{primary key: {column: value}} of every row of `table`."""
    select = f'SELECT * FROM "{table}"'
    if db.startswith("sqlite"):
        import sqlite3

        with closing(sqlite3.connect(db.removeprefix("sqlite:///"), timeout=20)) as conn:
            cursor = conn.execute(select)
            found = cursor.fetchall()
    else:
        import psycopg

        with psycopg.connect(db.replace("postgres://", "postgresql://")) as conn:
            cursor = conn.execute(select)
            found = cursor.fetchall()
    columns = [column[0] for column in cursor.description]
    return {row[columns.index(key)]: dict(zip(columns, row, strict=True)) for row in found}


def snapshot(db: str, tables: dict[str, str]) -> dict[str, dict]:
    return {table: rows(db, table, key) for table, key in tables.items()}


def changes(before: dict[str, dict], after: dict[str, dict]) -> dict[tuple, tuple]:
    """{(table, row, column): (before, after)} for every column of the
    previous schema whose value changed; a row named by its `name` if it has
    one. A row gone, or a column gone, fails here."""
    changed = {}
    for table, old_rows in before.items():
        new_rows = after[table]
        assert set(new_rows) == set(old_rows), f"{table}: rows lost or added by migrate"
        for key, old in old_rows.items():
            new = new_rows[key]
            assert set(old) <= set(new), f"{table}: columns dropped: {set(old) - set(new)}"
            for column, value in old.items():
                if new[column] != value:
                    changed[(table, old.get("name", key), column)] = (value, new[column])
    return changed


def test_the_previous_release_database_upgrades_and_serves(previous_database, tmp_path):
    db, made = previous_database
    tables = made["tables"]
    before = snapshot(db, tables)
    fires_before = upcoming_fires(previous_python(db, FIRES))
    assert sum(isinstance(fires, list) and len(fires) == 5 for fires in fires_before.values()) > 3

    manage(db, "migrate", "--no-input")

    after = snapshot(db, tables)
    # Jobs keep their behaviour: the current code fires each at the
    # instants the previous release did (scheduler 0020: no further
    # schedule, no one-shot instant, no bound, no run limit).
    assert upcoming_fires(current_python(db, FIRES)) == fires_before
    columns = new_job_columns(db)
    assert columns and all(row == ([], [], None, None, None, 0) for row in columns), columns
    long_stamp = made["long_stamp"]
    # notifications 0004: apply's stamps become owner and source; the
    # admin's rows (no stamp) the admin's. Nothing else changes.
    assert changes(before, after) == {
        ("notifications_channel", "ops-hook", "managed_by"): ("croniq", "apply"),
        ("notifications_channel", "team-chat", "managed_by"): ("", "admin"),
        ("notifications_channel", "finance-mail", "managed_by"): (long_stamp, "apply"),
        ("notifications_rule", "finance-failing", "managed_by"): ("croniq", "apply"),
        ("notifications_rule", "everything-else", "managed_by"): ("", "admin"),
    }
    sources = {
        row["name"]: row["managed_source"] for row in after_rows(db, "notifications_channel")
    }
    assert sources == {"ops-hook": "croniq", "team-chat": "", "finance-mail": ""}
    # control 0002: keys minted before it have no recorded parent.
    assert {row["parent_id"] for row in after_rows(db, "control_apikey")} == {None}

    server, processes = start_web_and_loop("split", db, tmp_path)
    try:
        fired = wait_for(
            lambda: runs_of(db, made["due_job"]),
            timeout=60,
            message="the loop to fire the job due at the upgrade",
        )
        assert {trigger for _, trigger, _, _ in fired} <= {"schedule", "catch_up"}

        headers = {"Authorization": f"Bearer {made['api_key']}"}
        answer = requests.get(f"{server.url}/api/v1/jobs?limit=100", headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        listed = {job["name"] for job in answer.json()["items"]}
        assert listed == {row["name"] for row in before["scheduler_job"].values()}

        # The runner that was online before the upgrade comes back under
        # its name and token.
        agent = start_agent(
            server.url,
            made["runner_token"],
            tmp_path / "agent.log",
            *("--name", "old-runner", "--labels", made["due_label"], "--once"),
            *("--poll-wait", "20"),
        )
        processes.append(agent)
        wait_for(lambda: not agent.alive(), timeout=60, message="the agent's one run")
        assert agent.popen.returncode == 0, agent.output()
        [ran] = [run for run in runs_of(db, made["due_job"]) if run[2] != "pending"]
        assert ran[2:] == ("succeeded", 0), agent.output()
        log = requests.get(
            f"{server.url}/api/v1/executions/{ran[0]}/log", headers=headers, timeout=30
        ).json()["data"]
        assert f"ran after the upgrade on {made['due_job']}" in log
    finally:
        for process in processes:
            process.stop()


def upcoming_fires(result) -> dict[str, object]:
    assert result.returncode == 0, result.stderr
    [line] = [line for line in result.stdout.splitlines() if line.startswith("FIRES:")]
    return json.loads(line.removeprefix("FIRES:"))


def current_python(db: str, script: Path):
    """A script run inside the current code's Django (it calls django.setup())."""
    settings = {"DJANGO_SETTINGS_MODULE": "croniq_project.settings", "PYTHONPATH": ROOT}
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=process_env(db, **settings),
        capture_output=True,
        text=True,
        timeout=300,
    )


def new_job_columns(db: str) -> list[tuple]:
    """Each job's columns of scheduler 0020, JSON read back as lists."""
    rows = query(
        db,
        "SELECT schedules, at, not_before, not_after, max_runs, scheduled_runs FROM scheduler_job",
    )
    return [tuple(json.loads(v) if isinstance(v, str) else v for v in row) for row in rows]


def runs_of(db: str, job: str) -> list[tuple]:
    """(id, trigger, state, exit_code) of each execution of `job`."""
    return query(
        db,
        "SELECT e.id, e.trigger, e.state, e.exit_code FROM scheduler_execution e"
        " JOIN scheduler_job j ON j.id = e.job_id WHERE j.name = %s ORDER BY e.id",
        (job,),
    )


def after_rows(db: str, table: str) -> list[dict[str, object]]:
    return list(rows(db, table, "id").values())
