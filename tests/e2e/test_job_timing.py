"""One-shot instants and `max_runs` through real processes (docs/design.md
§14): a job created through the management API with three `at` instants a
few seconds ahead and `max_runs: 2` is fired by the scheduler loop at the
first two, an agent runs both, and the job completes itself: disabled,
`"completed": true`, audited `job.completed`. One web server, one loop,
one agent; on whichever backend the suite runs on."""

import json
from datetime import UTC, datetime, timedelta

import pytest
import requests

from harness.processes import start_agent, start_web_and_loop, wait_for
from tests.agent.world import python

pytestmark = pytest.mark.e2e

LABEL = "one-shots"
CREDENTIALS = """
import json
from control.models import ApiKey
from runners.models import RunnerToken
print("CREDENTIALS:" + json.dumps(
    [RunnerToken.issue("one-shots")[1], ApiKey.issue("one-shots", ["admin"])[1]]
))
"""


class Api:
    def __init__(self, url: str, key: str) -> None:
        self.url = url + "/api/v1/"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {key}"

    def call(self, method: str, path: str, **kwargs) -> dict:
        answer = self.session.request(method, self.url + path, timeout=30, **kwargs)
        assert answer.ok, f"{method} {path}: {answer.status_code} {answer.text}"
        return answer.json()


def credentials(db: str) -> tuple[str, str]:
    printed = python(db, CREDENTIALS)
    [line] = [line for line in printed.splitlines() if line.startswith("CREDENTIALS:")]
    return tuple(json.loads(line.removeprefix("CREDENTIALS:")))


def runs(api: Api) -> list[dict]:
    """The job's executions, newest first."""
    return api.call("GET", "executions", params={"job": "twice"})["items"]


def test_one_shot_instants_fire_and_the_job_completes_after_max_runs(e2e_database, tmp_path):
    server, processes = start_web_and_loop("split", e2e_database, tmp_path)
    try:
        token, key = credentials(e2e_database)
        api = Api(server.url, key)
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
        instants = [start + timedelta(seconds=s) for s in (0, 1, 2)]
        job = {
            "name": "twice",
            "command": 'echo "twice ran"',
            "labels": [LABEL],
            "at": [t.isoformat() for t in instants],
            "max_runs": 2,
        }
        created = api.call("POST", "jobs", json=job)
        assert created["next_run_at"] == instants[0].isoformat().replace("+00:00", "Z")
        agent = start_agent(
            server.url, token, tmp_path / "agent.log",
            "--name", "one-shots", "--labels", LABEL, "--poll-wait", "1",
        )  # fmt: skip
        processes.append(agent)

        done = wait_for(
            lambda: (shown := api.call("GET", "jobs/twice"))["completed"] and shown,
            timeout=60,
            message="the job to complete itself",
        )
        assert (done["enabled"], done["scheduled_runs"], done["next_run_at"]) == (False, 2, None)
        settled = wait_for(
            lambda: (found := runs(api)) and {r["state"] for r in found} == {"succeeded"} and found,
            timeout=60,
            message="the agent to run both occurrences",
        )
        assert sorted(datetime.fromisoformat(r["scheduled_for"]) for r in settled) == instants[:2]
        assert api.call("GET", "jobs/twice/next") == {"instants": []}
        [event] = api.call("GET", "audit", params={"action": "job.completed"})["items"]
        assert event["data"]["max_runs"] == 2
    finally:
        for process in processes:
            process.stop()
