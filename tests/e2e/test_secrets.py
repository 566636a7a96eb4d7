"""The secrets store through real processes (docs/design.md §11): a secret
set over the API reaches the job's environment through the agent that
claimed the run, the log it sends holds `***` in its place, and the
database holds only ciphertext."""

import hashlib
from pathlib import Path

import pytest
import requests
from cryptography.fernet import Fernet

from harness.processes import Server, manage, on_postgres, start_agent, wait_for
from tests.agent.world import ready

pytestmark = pytest.mark.e2e

VALUE = "pw-9f3b2c7e-not-for-logs"
KEYS = Fernet.generate_key().decode()
JOB = {
    "name": "uses-secret",
    "schedule": "0 0 1 1 *",  # never during the test: a trigger runs it
    "command": 'printf %s "$DB_PASSWORD" | sha256sum; echo "password=$DB_PASSWORD"; echo "$DSN"',
    "labels": ["e2e-secret"],
    "env": {"DB_PASSWORD": "${secret:db-password}", "DSN": "pg://app:${secret:db-password}@db"},
}


def test_a_secret_reaches_the_job_and_never_its_log_or_the_database(e2e_database, tmp_path):
    server = Server(e2e_database, tmp_path / "web.log", CRONIQ_SECRETS_KEYS=KEYS)
    agent = None
    try:
        key = manage(e2e_database, "create_api_key", "ops", "--scopes", "admin").stdout.strip()
        token = manage(e2e_database, "create_runner_token", "secrets").stdout.strip()
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {key}"
        url = ready(server).url + "/api/v1/"

        refused = api.post(url + "jobs", json=JOB, timeout=30)
        assert refused.status_code == 422, refused.text
        assert 'env.DB_PASSWORD: unknown secret "db-password"' in refused.json()["detail"]

        stored = api.post(url + "secrets", json={"name": "db-password", "value": VALUE}, timeout=30)
        assert stored.status_code == 201, stored.text
        assert api.post(url + "jobs", json=JOB, timeout=30).status_code == 201
        run = api.post(url + "jobs/uses-secret/trigger", timeout=30).json()["execution_id"]

        agent = start_agent(server.url, token, tmp_path / "agent.log", "--labels", "e2e-secret")

        def finished():
            answer = api.get(url + f"executions/{run}", timeout=30).json()
            return answer if answer["state"] not in ("pending", "running") else None

        done = wait_for(finished, timeout=60, interval=0.2, message="the run to end")
        assert done["state"] == "succeeded", done
        log = api.get(url + f"executions/{run}/log", timeout=30).json()["data"]
        digest = hashlib.sha256(VALUE.encode()).hexdigest()
        assert log == f"{digest}  -\npassword=***\npg://app:***@db\n"
        shown = api.get(url + "jobs/uses-secret", timeout=30)
        assert VALUE not in shown.text and "${secret:db-password}" in shown.text
        audit = api.get(url + "audit", params={"limit": 500}, timeout=30)
        assert VALUE not in audit.text and "secret.created" in audit.text
        assert VALUE not in server.output() and VALUE not in agent.output()
        if not on_postgres():
            database = Path(e2e_database.removeprefix("sqlite:///"))
            for part in database.parent.glob(database.name + "*"):  # the file, its WAL
                assert VALUE.encode() not in part.read_bytes(), part
    finally:
        if agent is not None:
            agent.stop()
            print(f"--- agent\n{agent.output()}")
        server.stop()
