"""DATABASE_URL naming several PostgreSQL servers, as libpq does: every
connection, the LISTEN one too, reaches the first that takes writes."""

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.utils import ConnectionHandler

from core import db
from croniq_project.database import database_from_url
from harness.processes import free_port, on_postgres
from tests.test_configuration import run_check

FAILOVER_URL = "postgres://croniq:s3cret-pw@h1:5432,h2:5433/croniq?target_session_attrs=read-write"


def test_a_host_list_becomes_libpq_host_and_port_lists():
    config = database_from_url(FAILOVER_URL)
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert config["HOST"] == "h1,h2"
    assert config["PORT"] == "5432,5433"
    assert config["NAME"] == "croniq"
    assert config["USER"] == "croniq"
    assert config["PASSWORD"] == "s3cret-pw"
    assert config["OPTIONS"]["target_session_attrs"] == "read-write"
    assert config["CONN_HEALTH_CHECKS"] is True


def test_a_host_list_gives_up_on_a_lost_machine_in_seconds_unless_told_otherwise():
    config = database_from_url(FAILOVER_URL)
    assert config["OPTIONS"]["connect_timeout"] == 3  # psycopg would wait 130 s
    assert config["OPTIONS"]["tcp_user_timeout"] == 10000  # TCP would retry ~15 minutes
    assert config["OPTIONS"]["keepalives_idle"] == 10
    assert config["OPTIONS"]["keepalives_count"] == 3
    mine = database_from_url(FAILOVER_URL + "&connect_timeout=10&tcp_user_timeout=0")
    assert mine["OPTIONS"]["connect_timeout"] == 10
    assert mine["OPTIONS"]["tcp_user_timeout"] == 0
    # One server is read as before: its options are the URL's alone.
    assert "connect_timeout" not in database_from_url("postgres://croniq@db/croniq")["OPTIONS"]


@pytest.mark.parametrize(
    ("servers", "host", "port"),
    [
        ("h1,h2,h3", "h1,h2,h3", ""),  # libpq's default port for each
        ("h1:6432,h2", "h1,h2", "6432,"),  # an empty entry: the default port
        ("[::1]:5432,[fd00::2]:5433", "::1,fd00::2", "5432,5433"),
        ("%2Frun%2Fpostgresql,db2:5432", "/run/postgresql,db2", ",5432"),
    ],
)
def test_each_server_of_the_list_keeps_its_own_port(servers, host, port):
    config = database_from_url(f"postgresql://croniq@{servers}/croniq?target_session_attrs=primary")
    assert (config["HOST"], config["PORT"]) == (host, port)


def test_one_server_is_read_as_before():
    config = database_from_url("postgres://croniq:pw@db:5432/croniq?connect_timeout=5")
    assert (config["HOST"], config["PORT"]) == ("db", 5432)
    assert config["OPTIONS"] == {"connect_timeout": 5}


def test_a_password_with_a_comma_is_not_a_host_list():
    config = database_from_url("postgres://croniq:a,b@db/croniq")
    assert (config["HOST"], config["PASSWORD"]) == ("db", "a,b")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgres://croniq:s3cret-pw@h1,h2/croniq", "target_session_attrs=read-write"),
        ("postgres://croniq:s3cret-pw@h1,h2/croniq?target_session_attrs=any", "several servers"),
        ("postgres://croniq:s3cret-pw@h1/croniq?target_session_attrs=standby", "standby"),
        ("postgres://croniq:s3cret-pw@h1:x,h2/croniq?target_session_attrs=read-write", "'h1:x'"),
        ("postgres://croniq:s3cret-pw@h1,h2:70000/croniq?target_session_attrs=read-write", "70000"),
        ("postgres://croniq:s3cret-pw@h1,,h2/croniq?target_session_attrs=read-write", "''"),
        ("postgres://croniq:s3cret-pw@h1,h2/?target_session_attrs=read-write", "database name"),
    ],
)
def test_a_bad_host_list_names_the_setting_and_hides_the_password(url, says):
    with pytest.raises(ImproperlyConfigured) as refused:
        database_from_url(url, setting="CRONIQ_SOME_DATABASE_URL")
    message = str(refused.value)
    assert message.startswith("CRONIQ_SOME_DATABASE_URL: ")
    assert says in message
    assert "s3cret-pw" not in message
    assert "croniq:***@" in message


def test_a_host_list_without_a_session_for_writes_stops_start_up():
    result = run_check(DEBUG="1", DATABASE_URL=FAILOVER_URL.split("?")[0])
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "DATABASE_URL" in lines[0] and "target_session_attrs" in lines[0]
    assert "s3cret-pw" not in result.stderr


@pytest.fixture
def url_past_a_dead_server():
    """A host list whose first server refuses connections and whose second
    is the suite's PostgreSQL."""
    if not on_postgres():
        pytest.skip("runs in the PostgreSQL pass of the suite")
    live = settings.DATABASES["default"]
    host, port = live["HOST"] or "127.0.0.1", live["PORT"] or 5432
    dead = free_port()  # bound and closed: nothing listens there
    user = live["USER"] or "postgres"
    url = (
        f"postgres://{user}@127.0.0.1:{dead},{host}:{port}/postgres?target_session_attrs=read-write"
    )
    config = database_from_url(url)
    config["PASSWORD"] = live["PASSWORD"]
    return config, int(port)


@pytest.mark.postgres
def test_django_connects_to_the_first_server_that_takes_writes(
    url_past_a_dead_server, django_db_blocker
):
    config, port = url_past_a_dead_server
    handler = ConnectionHandler({"default": config})
    try:
        with django_db_blocker.unblock(), handler["default"].cursor() as cursor:
            cursor.execute("SELECT inet_server_port(), pg_is_in_recovery()")
            assert cursor.fetchone() == (port, False)
    finally:
        handler.close_all()


@pytest.mark.postgres
def test_the_listen_connection_takes_the_host_list_too(url_past_a_dead_server, monkeypatch):
    config, port = url_past_a_dead_server
    monkeypatch.setattr(settings, "DATABASES", {"default": config})
    params = db.listen_params()
    assert params["target_session_attrs"] == "read-write"
    with db.listen_connection() as conn:
        assert conn.info.port == port
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
