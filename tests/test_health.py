"""/healthz: 200 with the database answering, a bare 503 without it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_healthz_answers_200_when_the_database_answers(client, db):
    answer = client.get("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok"}


# A database that does not answer: a real process with a real, unreachable
# database, because the web process cannot be made to lose its own in-process.
PROBE = """
import django
django.setup()
from django.test import Client
r = Client().get("/healthz", HTTP_HOST="localhost")
print(r.status_code, r.content.decode())
"""


@pytest.mark.parametrize(
    ("url", "detail"),
    [
        ("postgres://croniq:s3cret-pw@127.0.0.1:9/croniq", "127.0.0.1"),
        ("sqlite:////nonexistent-croniq-dir/croniq.sqlite3", "unable to open database file"),
    ],
)
def test_healthz_tells_anonymous_callers_only_that_the_database_is_unavailable(url, detail):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DEBUG")}
    env.update(DATABASE_URL=url, SECRET_KEY="x" * 50)
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    status, body = result.stdout.strip().split(" ", 1)
    assert status == "503"
    assert json.loads(body) == {"status": "unavailable"}
    assert detail in result.stderr  # the reason is logged for the operator
    assert "s3cret-pw" not in result.stdout + result.stderr
