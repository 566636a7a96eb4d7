"""`requires` through real processes (docs/design.md §14): a web server, the
scheduler loop and an agent. `report` requires `import`, which has not
run: report's occurrence waits, queued; `import` runs and succeeds, and
the waiting run is released at once (in the success's transaction, not at
the loop's next look) and runs. Jobs requiring a job that never runs are
skipped (`requires_policy: skip`) or failed (`fail`, a dead letter), each
audited and its event recorded."""

from datetime import UTC, datetime

import pytest
import requests

from harness.processes import (
    Server,
    drop_database,
    manage,
    migrated_database,
    query,
    start_agent,
    start_loop,
    wait_for,
)
from tests.agent.world import issue_token, ready

pytestmark = pytest.mark.e2e

SETTINGS = dict(CRONIQ_HEARTBEAT_INTERVAL=1)
LABEL = "requires"
NEVER = "0 0 1 1 *"  # a schedule that never comes during the test
SCOPES = ("jobs:read", "jobs:write", "jobs:trigger", "audit:read", "dead-letters:read")


def job(name, schedule=NEVER, **fields):
    return {"name": name, "schedule": schedule, "command": "true", "labels": [LABEL], **fields}


def needs(name, within):
    return [{"job": name, "succeeded_within": within}]


JOBS = [
    job("import"),
    job("never"),
    # Every 2 s: its first occurrence comes before import has run. Skip: the
    # occurrences that waited beside it are skipped once it is released.
    job("report", "@every 2s", overlap="skip", requires=needs("import", "1h")),
    job("skipper", "@every 2s", requires_policy="skip", requires=needs("never", 60)),
    job("failer", "@every 2s", requires_policy="fail", requires=needs("never", 60)),
]


class Api:
    def __init__(self, url, key):
        self.url = url + "/api/v1/"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {key}"

    def call(self, method, path, **kwargs):
        answer = self.session.request(method, self.url + path, timeout=30, **kwargs)
        assert answer.ok, f"{method} {path}: {answer.status_code} {answer.text}"
        return answer.json()


def runs(db, name):
    """A job's runs: (id, state, scheduled_for, requires_until, claimed_at,
    finished_at, error)."""
    return query(
        db,
        "SELECT e.id, e.state, e.scheduled_for, e.requires_until, e.claimed_at, e.finished_at,"
        " e.error FROM scheduler_execution e JOIN scheduler_job j ON j.id = e.job_id"
        " WHERE j.name = %s ORDER BY e.scheduled_for, e.id",
        (name,),
    )


def in_state(db, name, state):
    return [run for run in runs(db, name) if run[1] == state]


def test_a_waiting_run_is_released_by_its_requirements_success_and_the_policies_audited(
    tmp_path,
):
    db = migrated_database(tmp_path)
    processes = []
    try:
        server = Server(db, tmp_path / "web.log", **SETTINGS)
        processes.append(server)
        processes.append(start_loop(db, tmp_path / "loop.log", **SETTINGS))
        token = issue_token(db)
        key = manage(db, "create_api_key", "ci", "--scopes", *SCOPES).stdout.strip()
        api = Api(ready(server).url, key)
        for item in JOBS:
            api.call("POST", "jobs", json=item)
        args = ("--name", "requires-agent", "--labels", LABEL, "--capacity", "4")
        processes.append(start_agent(server.url, token, tmp_path / "agent.log", *args))

        waiting = wait_for(
            lambda: [r for r in in_state(db, "report", "queued") if r[3] is not None],
            timeout=30,
            message="a report run waiting for import",
        )
        wait_for(lambda: in_state(db, "skipper", "skipped"), timeout=30, message="a skip")
        wait_for(lambda: in_state(db, "failer", "failed"), timeout=30, message="a failure")
        assert in_state(db, "report", "succeeded") == []

        api.call("POST", "jobs/import/trigger")
        [imported] = wait_for(
            lambda: in_state(db, "import", "succeeded"), timeout=30, message="import"
        )
        first = waiting[0][0]
        released = wait_for(
            lambda: [r for r in in_state(db, "report", "succeeded") if r[0] == first],
            timeout=30,
            message="the waiting report run released and run",
        )
        # Released in the transaction that settled import's success: it
        # starts at that success's instant (the loop's step, every 5 s,
        # would release it at an instant of its own).
        started_after = seconds_between(imported[5], released[0][4])
        print(f"report started {started_after:.3f}s after import succeeded")
        run_after = "SELECT run_after FROM scheduler_execution WHERE id = %s"
        [(run_after,)] = query(db, run_after, (first,))
        assert instant(run_after) == instant(imported[5])
        assert started_after >= 0

        audited = api.call(
            "GET", "audit", params={"action": "execution.requirements_unmet", "limit": 500}
        )["items"]
        policies = {event["data"]["policy"] for event in audited}
        assert policies == {"wait", "skip", "fail"}
        [failed] = in_state(db, "failer", "failed")[:1]
        assert failed[6] == "requirements unmet"
        letters = api.call("GET", "dead-letters", params={"job": "failer"})["items"]
        assert failed[0] in {letter["execution"] for letter in letters}
        events = query(
            db, "SELECT COUNT(*) FROM notifications_event WHERE name = %s",
            ("execution.requirements_unmet",),
        )  # fmt: skip
        assert events[0][0] >= 3
    finally:
        for process in reversed(processes):
            process.stop()
            print(f"--- {process.log_path}\n{process.output()}")
        drop_database(db)


def seconds_between(earlier, later):
    """Seconds from one stored instant to another, as either backend reads them."""
    return (instant(later) - instant(earlier)).total_seconds()


def instant(value):
    if isinstance(value, str):  # SQLite
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)
