"""scheduler_loop keeps going through a PostgreSQL restart and catches up."""

import datetime as dt
import time

import pytest
import yaml

from harness.private_postgres import PrivatePostgres, postgres_bin
from harness.processes import manage, on_postgres, query, start_loop, wait_for

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(postgres_bin() is None, reason="PostgreSQL server binaries not installed"),
]


@pytest.fixture
def private_postgres():
    if not on_postgres():
        pytest.skip("runs in the PostgreSQL pass of the suite")
    server = PrivatePostgres()
    server.start()
    server.wait_ready()
    yield server
    server.destroy()


def test_the_loop_survives_a_postgres_restart_and_catches_up(private_postgres, tmp_path):
    db = private_postgres.url
    manage(db, "migrate", "--no-input")
    jobs = {
        "jobs": [
            {"name": "every-second", "schedule": "@every 1s", "command": "true"},
            {
                "name": "catch-up-once",
                "schedule": "@every 2s",
                "command": "true",
                "misfire_policy": "run_once",
            },
        ]
    }
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(jobs))
    manage(db, "apply", str(path))
    loop = start_loop(db, tmp_path / "loop.log", CRONIQ_MISFIRE_GRACE=1)
    try:
        count = "SELECT COUNT(*) FROM scheduler_execution"
        wait_for(lambda: query(db, count)[0][0] >= 3, message="first executions")

        misfired_before = len(query(db, misfires_of("catch-up-once")))
        private_postgres.stop()
        time.sleep(6)  # the loop sees the outage, backs off, keeps running
        assert loop.alive(), loop.output()
        private_postgres.start()

        before = query(db, count)[0][0]
        wait_for(lambda: query(db, count)[0][0] >= before + 3, timeout=40, message="catch-up")
        wait_for(
            lambda: len(query(db, misfires_of("catch-up-once"))) > misfired_before,
            timeout=20,
            message="the outage's misfire",
        )
        assert loop.alive()
    finally:
        assert loop.stop() == 0
    output = loop.output()
    assert "database unavailable" in output
    assert "database is back" in output

    rows = query(
        db,
        "SELECT e.scheduled_for, e.trigger FROM scheduler_execution e JOIN scheduler_job j "
        "ON j.id = e.job_id WHERE j.name = 'catch-up-once' ORDER BY e.scheduled_for",
    )
    gaps = [(b - a).total_seconds() for (a, _), (b, _) in zip(rows, rows[1:], strict=False)]
    assert max(gaps) >= 4  # the missed instants were not replayed
    data = query(db, misfires_of("catch-up-once"))[0][0]  # the outage's, the latest
    assert data["policy"] == "run_once"
    assert data["missed"] >= 2  # 6 s down, an instant every 2 s
    # The outage was longer than the grace. run_once fires at most one
    # execution for the gap: a catch-up of the last missed instant, or none
    # when the loop came back within the grace of (or just ahead of) an
    # instant that covers the gap. Which one depends on the restart's phase.
    assert data["missed"] - data["dropped"] in (0, 1)
    assert isinstance(rows[0][0], dt.datetime)


def misfires_of(job_name):
    return (
        "SELECT a.data FROM audit_auditevent a JOIN scheduler_job j ON a.target_id = j.id::text "
        f"WHERE a.action = 'job.misfire' AND j.name = '{job_name}' ORDER BY a.at DESC"
    )
