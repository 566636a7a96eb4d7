"""Property-based fuzzing of the runner API from its own OpenAPI schema."""

import subprocess

import pytest

from harness.processes import BIN
from tests.e2e.protocol_client import RunnerClient, seed, start_server, token

pytestmark = pytest.mark.e2e


@pytest.fixture
def server(e2e_database, tmp_path):
    process = start_server(e2e_database, tmp_path / "web.log")
    yield process
    process.stop()


def test_schemathesis_finds_no_server_error(server, e2e_database, tmp_path):
    secret = token(e2e_database)
    runner = RunnerClient(server.url, secret, name="fuzz-target")
    runner.register()
    seed(e2e_database, {"job": "fuzzed", "labels": []})
    [held] = runner.claim()
    # Real ids, so the fuzzer gets past "404 unknown id" into the logic.
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        f"[parameters]\nrunner_id = {runner.runner_id}\nexecution_id = {held['id']}\n"
    )
    run = subprocess.run(
        [
            str(BIN / "schemathesis"),
            "--config-file",
            str(config),
            "run",
            server.url + "/api/openapi.json",
            "--checks",
            "not_a_server_error",
            "--header",
            f"Authorization: Bearer {secret}",
            "--max-time",
            "25",
            "--request-timeout",
            "70",
            "--workers",
            "2",
            # The coverage phase can fail inside schemathesis itself on some
            # inputs; examples and fuzzing are what hunt for 500s.
            "--phases",
            "examples,fuzzing",
        ],
        cwd=tmp_path,  # its example database stays out of the work tree
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-5000:]
    assert "Traceback" not in server.output()
