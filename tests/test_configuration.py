"""Configuration mistakes stop start-up with one line naming the setting."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from croniq_project.database import database_from_url
from croniq_project.env import envbool, envint

ROOT = Path(__file__).resolve().parents[1]


def run_check(*command, **env):
    base = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG", "DATABASE_URL")}
    base.update(env)
    return subprocess.run(
        [sys.executable, *(command or ["manage.py", "check"])],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )


WEB_START = ("-c", "import croniq_project.asgi")


def test_missing_secret_key_with_debug_off_stops_the_web_server_with_one_line():
    result = run_check(*WEB_START, DEBUG="0")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "SECRET_KEY" in lines[0]


def test_the_web_server_starts_with_a_secret_key(tmp_path):
    result = run_check(*WEB_START, DEBUG="0", SECRET_KEY="x" * 50)
    assert result.returncode == 0, result.stderr


def test_management_commands_need_no_secret_key(tmp_path):
    result = run_check(
        "manage.py", "help", "--commands", DEBUG="0", DATABASE_URL=f"sqlite:///{tmp_path}/c.db"
    )
    assert result.returncode == 0, result.stderr
    assert {"scheduler_loop", "apply", "next_runs", "create_runner_token"} <= set(
        result.stdout.split()
    )


def test_bad_database_url_stops_startup_naming_the_setting():
    result = run_check(DEBUG="1", DATABASE_URL="mysql-ish://nowhere")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "DATABASE_URL" in lines[0]


def test_malformed_integer_setting_names_the_variable():
    result = run_check(DEBUG="1", CRONIQ_FLAP_THRESHOLD="lots")
    assert result.returncode == 2
    assert "CRONIQ_FLAP_THRESHOLD" in result.stderr


def test_good_configuration_passes_the_check(tmp_path):
    result = run_check(DEBUG="0", SECRET_KEY="x" * 50, DATABASE_URL=f"sqlite:///{tmp_path}/c.db")
    assert result.returncode == 0, result.stderr


def test_sqlite_urls_get_wal_busy_timeout_and_immediate_transactions(tmp_path):
    config = database_from_url(f"sqlite:///{tmp_path}/c.db")
    assert config["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in config["OPTIONS"]["init_command"]
    assert "busy_timeout" in config["OPTIONS"]["init_command"]


def test_postgres_urls_are_understood():
    config = database_from_url("postgres://croniq:pw@db:5432/croniq")
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert config["NAME"] == "croniq"
    assert config["HOST"] == "db"


def test_env_helpers_refuse_malformed_values(monkeypatch):
    monkeypatch.setenv("CRONIQ_X", "maybe")
    with pytest.raises(ImproperlyConfigured, match="CRONIQ_X"):
        envbool("CRONIQ_X", False)
    monkeypatch.setenv("CRONIQ_Y", "-3")
    with pytest.raises(ImproperlyConfigured, match="CRONIQ_Y"):
        envint("CRONIQ_Y", 1, minimum=0)


def test_secrets_can_come_from_files(monkeypatch, tmp_path):
    secret = tmp_path / "key"
    secret.write_text("from-a-file\n")
    monkeypatch.setenv("CRONIQ_Z_FILE", str(secret))
    from croniq_project.env import env

    assert env("CRONIQ_Z") == "from-a-file"
