"""Twenty triggers with one idempotency key, sent at once to two real web
processes sharing one database, create one execution (docs/design.md §8: a
unique constraint, not a read-then-write)."""

import threading

import pytest
import requests

from harness.processes import Server, manage, query

pytestmark = pytest.mark.e2e

RACERS = 20


@pytest.fixture
def servers(e2e_database, tmp_path):
    started = [Server(e2e_database, tmp_path / f"web-{n}.log") for n in range(2)]
    try:
        for server in started:
            server.wait_ready()
        yield started
    finally:
        for server in started:
            server.stop()


def test_one_key_on_two_web_processes_creates_one_execution(e2e_database, servers, tmp_path):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text('jobs:\n  - {name: report, schedule: "0 3 * * *", command: "true"}\n')
    manage(e2e_database, "apply", str(jobs))
    key = manage(e2e_database, "create_api_key", "ci", "--scopes", "jobs:trigger").stdout.strip()
    barrier = threading.Barrier(RACERS)
    answers, errors = [], []

    def race(n):
        try:
            barrier.wait()
            answers.append(
                requests.post(
                    f"{servers[n % 2].url}/api/v1/jobs/report/trigger",
                    json={"idempotency_key": "deploy-4711"},
                    headers={"Authorization": f"Bearer {key}"},
                    timeout=30,
                )
            )
        except Exception as error:  # surfaced below: a racer must never fail
            errors.append(error)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert [answer.status_code for answer in answers] == [202] * RACERS, answers[0].text
    executions = query(e2e_database, "SELECT id FROM scheduler_execution")
    assert len(executions) == 1
    assert {answer.json()["execution_id"] for answer in answers} == {executions[0][0]}
    assert sorted(answer.json()["deduplicated"] for answer in answers) == [False] + [True] * 19
