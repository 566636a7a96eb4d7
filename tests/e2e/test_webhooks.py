"""A job's webhook through real processes (docs/design.md §14): a web
server of the current code and an agent from its wheel. A signed POST to
the job's URL runs it once per Idempotency-Key, and the command sees
CRONIQ_TRIGGER=webhook and the parameter the body set. A body past the
limit is refused before the server holds it. Runs on SQLite, and on
PostgreSQL with CRONIQ_TEST_DATABASE_URL."""

import json
import time

import pytest
import requests

from harness.processes import Server, free_port, manage, start_agent, wait_for
from notifications.signatures import sign
from tests.agent.world import ready

pytestmark = pytest.mark.e2e

SECRET = "e2e-hook-secret"
JOB = {
    "name": "deploy",
    "command": 'echo "trigger=$CRONIQ_TRIGGER version=$VERSION"',
    "parameters": ["VERSION"],
    "labels": ["e2e-hook"],
    "webhook": True,
    "webhook_secret": "${CRONIQ_SECRET_DEPLOY_HOOK}",
}


def test_a_signed_call_runs_the_job_once_with_its_trigger_and_parameter(e2e_database, tmp_path):
    port = free_port()
    server = Server(
        e2e_database,
        tmp_path / "web.log",
        port=port,
        CRONIQ_PUBLIC_URL=f"http://127.0.0.1:{port}",
        CRONIQ_SECRET_DEPLOY_HOOK=SECRET,
    )
    agent = None
    try:
        key = manage(
            e2e_database, "create_api_key", "hooks", "--scopes", "jobs:write", "executions:read"
        ).stdout.strip()
        token = manage(e2e_database, "create_runner_token", "hooks").stdout.strip()
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {key}"
        ready(server)
        created = api.post(f"{server.url}/api/v1/jobs", json=JOB, timeout=30)
        assert created.status_code == 201, created.text
        url = created.json()["webhook_url"]
        assert url.startswith(f"{server.url}/api/v1/hooks/")

        huge = requests.post(url, data=b"x" * (8 * 1024 * 1024), timeout=30)
        assert huge.status_code == 413, huge.text

        body = json.dumps({"env": {"VERSION": "1.4.2"}}).encode()
        answers = [
            requests.post(
                url,
                data=body,
                headers={
                    "Content-Type": "application/json",
                    "Idempotency-Key": "build-4711",
                    "Croniq-Signature": sign(SECRET, time.time(), body),
                },
                timeout=30,
            )
            for _ in range(2)
        ]
        assert [answer.status_code for answer in answers] == [202, 202], answers[0].text
        run = answers[0].json()["execution_id"]
        assert answers[1].json() == {"execution_id": run, "deduplicated": True}

        agent = start_agent(server.url, token, tmp_path / "agent.log", "--labels", "e2e-hook")

        def finished():
            answer = api.get(f"{server.url}/api/v1/executions/{run}", timeout=30).json()
            return answer if answer["state"] not in ("pending", "running") else None

        done = wait_for(finished, timeout=60, interval=0.2, message="the webhook's run to end")
        assert (done["state"], done["trigger"]) == ("succeeded", "webhook")
        log = api.get(f"{server.url}/api/v1/executions/{run}/log", timeout=30).json()["data"]
        assert log == "trigger=webhook version=1.4.2\n"
        listed = api.get(f"{server.url}/api/v1/executions", params={"job": "deploy"}, timeout=30)
        assert [item["id"] for item in listed.json()["items"]] == [run]
        assert "Traceback" not in server.output()
    finally:
        if agent is not None:
            agent.stop()
            print(f"--- agent\n{agent.output()}")
        server.stop()
