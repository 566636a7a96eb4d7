"""The real loop and web process together: a job's executions are created
and claimed ahead of their instant, and reach the runner at it, never
before."""

import datetime as dt
import time

import pytest
import yaml

from tests.e2e.processes import manage, start_loop
from tests.e2e.protocol_client import RunnerClient, token

pytestmark = pytest.mark.e2e


def scheduled_epoch(assignment):
    return dt.datetime.fromisoformat(assignment["scheduled_for"].replace("Z", "+00:00")).timestamp()


def test_a_fired_job_reaches_its_runner_at_its_instant_never_before(server, e2e_database, tmp_path):
    jobs = {
        "jobs": [
            {"name": "each-second", "schedule": "@every 1s", "command": "true", "labels": ["linux"]}
        ]
    }
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump(jobs))
    manage(e2e_database, "apply", str(tmp_path / "jobs.yaml"))
    runner = RunnerClient(server.url, token(e2e_database), labels=["linux"])
    assert runner.register().status_code == 200

    loop = start_loop(e2e_database, tmp_path / "loop.log")
    delays = []
    try:
        deadline = time.monotonic() + 30
        while len(delays) < 4 and time.monotonic() < deadline:
            for assignment in runner.claim(wait=5):
                delays.append(time.time() - scheduled_epoch(assignment))
                runner.finish(assignment["id"], assignment["lease"])
    finally:
        loop.stop()

    assert len(delays) >= 4, loop.output()
    assert min(delays) >= 0, delays  # never before its instant
