"""Configuration mistakes stop start-up with one line naming the setting."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from croniq_project.database import database_from_url, redacted
from croniq_project.env import envbool, envfloat, envint
from croniq_project.pooling import listen_database, pooler_safe

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


def test_earlier_secret_keys_are_read_from_the_environment():
    # What a rotated SECRET_KEY signed (jobs' webhook URLs) stays valid meanwhile.
    script = "from django.conf import settings; print(settings.SECRET_KEY_FALLBACKS)"
    result = run_check("manage.py", "shell", "-c", script, SECRET_KEY_FALLBACKS="old-1, old-2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("['old-1', 'old-2']")


def test_a_started_web_application_keeps_its_start_up_objects_from_the_collector(tmp_path):
    # Full collections in a web process then scan only what came after
    # start-up, not Django, the apps and the URL patterns (scheduler/firing/long_lived.py).
    script = (
        "import gc, sys, croniq_project.asgi; "
        "from django.urls import get_resolver; "
        "print(gc.get_freeze_count(), 'croniq_project.urls' in sys.modules)"
    )
    result = run_check("-c", script, DEBUG="0", SECRET_KEY="x" * 50)
    assert result.returncode == 0, result.stderr
    frozen, urls_loaded = result.stdout.split()
    assert urls_loaded == "True"
    assert int(frozen) > 100_000


def test_a_started_web_application_switches_threads_often():
    # The hub's step, the answers and the finishes take turns on the
    # interpreter: Python's 5 ms default slowed each query's return.
    script = "import sys, croniq_project.asgi; print(sys.getswitchinterval())"
    result = run_check("-c", script, DEBUG="0", SECRET_KEY="x" * 50)
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) == 0.0005


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


@pytest.mark.parametrize("value", ["collector:4318", "ftp://collector", "http://", "http://c:x"])
def test_a_bad_otlp_endpoint_stops_startup_naming_the_setting(value):
    result = run_check(DEBUG="1", CRONIQ_OTLP_ENDPOINT=value)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "CRONIQ_OTLP_ENDPOINT" in lines[0] and "http://collector:4318" in lines[0]


def test_the_web_server_refuses_to_export_spans_without_the_tracing_extra():
    # The extra's exporter made unimportable, as on an install without it.
    hidden = "import sys; sys.modules['opentelemetry.exporter.otlp.proto.http'] = None; "
    web = ("-c", hidden + "import croniq_project.asgi")
    result = run_check(*web, DEBUG="1", CRONIQ_OTLP_ENDPOINT="http://collector:4318")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "croniq[tracing]" in lines[0]
    started = run_check(*web, DEBUG="1")
    assert started.returncode == 0, started.stderr


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


# -- numbers: nan, inf and negatives are refused ---------------------------

SETTINGS_SOURCE = (ROOT / "croniq_project" / "settings.py").read_text()
NUMBER_SETTINGS = re.findall(r'env(?:int|float)\("(CRONIQ_\w+)"', SETTINGS_SOURCE)


def test_every_croniq_number_is_read_by_a_helper_that_refuses_nonsense():
    assert len(NUMBER_SETTINGS) >= 12  # the list below is not empty by accident
    assert "CRONIQ_LEASE_TTL" in NUMBER_SETTINGS


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity", "-1"])
def test_every_croniq_number_refuses_nan_inf_and_negatives_with_its_name(value):
    # One process loads the settings module once per variable, as start-up does.
    script = (
        "import os, runpy, sys\n"
        "from django.core.exceptions import ImproperlyConfigured\n"
        "for name in sys.argv[2:]:\n"
        "    os.environ[name] = sys.argv[1]\n"
        "    try:\n"
        "        runpy.run_path('croniq_project/settings.py')\n"
        "        print(name, 'ACCEPTED')\n"
        "    except ImproperlyConfigured as e:\n"
        "        print(name, 'REFUSED', e)\n"
        "    del os.environ[name]\n"
    )
    result = run_check("-c", script, value, *NUMBER_SETTINGS, DEBUG="1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == len(NUMBER_SETTINGS)
    for name, line in zip(NUMBER_SETTINGS, lines, strict=True):
        assert line.startswith(f"{name} REFUSED {name}:"), line


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_env_helpers_refuse_values_that_are_not_finite(monkeypatch, value):
    monkeypatch.setenv("CRONIQ_X", value)
    with pytest.raises(ImproperlyConfigured, match="CRONIQ_X: expected a finite number"):
        envfloat("CRONIQ_X", 1.0)
    with pytest.raises(ImproperlyConfigured, match="CRONIQ_X: expected an integer"):
        envint("CRONIQ_X", 1)


def test_env_helpers_refuse_negatives_unless_told_otherwise(monkeypatch):
    monkeypatch.setenv("CRONIQ_X", "-0.5")
    with pytest.raises(ImproperlyConfigured, match="CRONIQ_X: must be at least 0"):
        envfloat("CRONIQ_X", 1.0)
    assert envfloat("CRONIQ_X", 1.0, minimum=None) == -0.5


def test_a_nan_setting_stops_the_web_server_with_one_line():
    result = run_check(*WEB_START, DEBUG="0", SECRET_KEY="x" * 50, CRONIQ_TICK_INTERVAL="nan")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "croniq: configuration error: CRONIQ_TICK_INTERVAL: expected a finite number, got 'nan'"
    ]


# -- lease TTL and heartbeat interval are checked together -----------------

LOOP_ONCE = ("manage.py", "scheduler_loop", "--once")


@pytest.mark.parametrize("command", [WEB_START, LOOP_ONCE, ("manage.py", "check")])
def test_a_heartbeat_longer_than_a_third_of_the_lease_stops_every_process(tmp_path, command):
    result = run_check(
        *command,
        DEBUG="0",
        SECRET_KEY="x" * 50,
        DATABASE_URL=f"sqlite:///{tmp_path}/c.db",
        CRONIQ_LEASE_TTL="15",  # the default heartbeat is 10 s
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "CRONIQ_HEARTBEAT_INTERVAL (10s)" in lines[0]
    assert "CRONIQ_LEASE_TTL (15s)" in lines[0]


@pytest.mark.parametrize(("ttl", "heartbeat"), [("15", "5"), ("3", "1"), ("30", "10")])
def test_a_heartbeat_of_at_most_a_third_of_the_lease_is_accepted(tmp_path, ttl, heartbeat):
    result = run_check(
        DEBUG="1",
        DATABASE_URL=f"sqlite:///{tmp_path}/c.db",
        CRONIQ_LEASE_TTL=ttl,
        CRONIQ_HEARTBEAT_INTERVAL=heartbeat,
    )
    assert result.returncode == 0, result.stderr


# -- DATABASE_URL is never printed with its password -----------------------

PASSWORD_URL = "postgres://croniq:s3cret-pw@db.invalid:5432/croniq"


@pytest.mark.parametrize(
    "url",
    [
        "postgres://croniq:s3cret-pw@db.invalid:notaport/croniq",
        "mysql://croniq:s3cret-pw@db.invalid/croniq",
        "postgres://croniq:s3cret-pw@db.invalid/",
    ],
)
def test_a_bad_database_url_is_reported_without_its_password(url):
    result = run_check(DEBUG="1", DATABASE_URL=url)
    assert result.returncode == 2
    assert "DATABASE_URL" in result.stderr
    assert "croniq:***@db.invalid" in result.stderr
    assert "s3cret-pw" not in result.stderr


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (PASSWORD_URL, "postgres://croniq:***@db.invalid:5432/croniq"),
        ("postgres://u:p@ss/w@host/db", "postgres://u:***@host/db"),
        ("postgres://croniq@db/croniq", "postgres://croniq@db/croniq"),
        ("sqlite:////srv/a:b@c.db", "sqlite:////srv/a:b@c.db"),
    ],
)
def test_redacted_urls_keep_everything_but_the_password(url, shown):
    assert redacted(url) == shown


def test_the_debug_error_page_cannot_show_the_database_password():
    # Django's error page and diffsettings print every upper-case setting; the
    # URL is not kept as one (DATABASES' PASSWORD is cleansed by Django).
    script = (
        "import django; django.setup()\n"
        "from django.views.debug import SafeExceptionReporterFilter\n"
        "print(SafeExceptionReporterFilter().get_safe_settings())\n"
    )
    listen_url = PASSWORD_URL.replace("db.invalid", "listen.invalid")
    result = run_check(
        "-c", script, DEBUG="1", DATABASE_URL=PASSWORD_URL, CRONIQ_LISTEN_DATABASE_URL=listen_url
    )
    assert result.returncode == 0, result.stderr
    assert "db.invalid" in result.stdout  # the settings were printed
    assert "listen.invalid" in result.stdout
    assert "s3cret-pw" not in result.stdout


# -- CRONIQ_LISTEN_DATABASE_URL: the direct connection LISTEN takes ----------

POOLED_URL = "postgres://croniq:s3cret-pw@pgbouncer.invalid:6432/croniq"


def test_the_listen_database_is_the_default_one_unless_set():
    default = database_from_url(POOLED_URL)
    assert listen_database(None, default) is None
    assert listen_database("  ", default) is None
    direct = listen_database("postgres://croniq:pw@db.invalid:5432/croniq", default)
    assert (direct["HOST"], direct["PORT"], direct["NAME"]) == ("db.invalid", 5432, "croniq")


@pytest.mark.parametrize(
    ("database_url", "listen_url", "reason"),
    [
        (POOLED_URL, "sqlite:////srv/croniq.sqlite3", "expected a postgres:// URL"),
        (POOLED_URL, "mysql://croniq:s3cret-pw@db.invalid/croniq", "unsupported scheme"),
        (POOLED_URL, "postgres://croniq:s3cret-pw@db.invalid:notaport/croniq", "cannot parse"),
        (POOLED_URL, "postgres://croniq:s3cret-pw@db.invalid/", "no database name"),
        ("sqlite:////srv/croniq.sqlite3", "postgres://db.invalid/croniq", "SQLite has no LISTEN"),
    ],
)
def test_a_bad_listen_database_url_is_refused_naming_the_setting(database_url, listen_url, reason):
    with pytest.raises(ImproperlyConfigured) as refused:
        listen_database(listen_url, database_from_url(database_url))
    message = str(refused.value)
    assert message.startswith("CRONIQ_LISTEN_DATABASE_URL: ")
    assert reason in message
    assert "s3cret-pw" not in message


def test_a_bad_listen_database_url_stops_startup_with_one_line():
    result = run_check(
        DEBUG="1", DATABASE_URL=POOLED_URL, CRONIQ_LISTEN_DATABASE_URL="sqlite:////srv/c.db"
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("croniq: configuration error: CRONIQ_LISTEN_DATABASE_URL: ")


def test_postgres_connections_keep_no_cursor_or_prepared_statement_in_the_session():
    config = pooler_safe(database_from_url(POOLED_URL))
    assert config["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert config["OPTIONS"]["prepare_threshold"] is None
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL: prepare_threshold"):
        pooler_safe(database_from_url(POOLED_URL + "?server_side_binding=true&prepare_threshold=5"))


def test_the_listen_connection_takes_the_listen_database_when_one_is_set(settings):
    from core.db import listen_params

    direct = "postgres://croniq:pw@db.invalid:5433/croniq?sslmode=require"
    settings.CRONIQ_LISTEN_DATABASE = listen_database(direct, database_from_url(POOLED_URL))
    assert listen_params() == {
        "dbname": "croniq",
        "user": "croniq",
        "password": "pw",
        "host": "db.invalid",
        "port": 5433,
        "sslmode": "require",
    }
    settings.CRONIQ_LISTEN_DATABASE = None
    assert listen_params()["dbname"] == settings.DATABASES["default"]["NAME"]
