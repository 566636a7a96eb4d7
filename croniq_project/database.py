"""DATABASE_URL -> Django DATABASES entry, with Croniq's per-backend tuning.

A PostgreSQL URL may name several servers, as libpq does
(`postgres://user@h1:5432,h2:5433/croniq?target_session_attrs=read-write`):
every connection, the LISTEN one included, takes the first that answers and
accepts writes, so Croniq follows a primary failover without a proxy in
front (docs/design.md §16). dj-database-url reads one host: the list is
taken out here and handed to libpq as HOST "h1,h2" and PORT "5432,5433".
"""

import re
from typing import Any
from urllib.parse import unquote

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

SUPPORTED_ENGINES = {
    "django.db.backends.sqlite3",
    "django.db.backends.postgresql",
}


# `scheme://user:password@host`: everything from the user's colon to the last
# `@` (a password may hold an unencoded `@` or `/`; hiding too much is fine).
PASSWORD_IN_URL = re.compile(r"(://[^:/@]*:).*@")


def redacted(url: str) -> str:
    """The URL as it may be printed: its password replaced by `***`."""
    return PASSWORD_IN_URL.sub(r"\1***@", url, count=1)


# `postgres://[userinfo@]h1[:p1],h2[:p2],...[/...]`: the userinfo runs to the
# last `@` (a password may hold an unencoded `@`); a host list holds a comma.
HOST_LIST_IN_URL = re.compile(
    r"^(?P<head>(?:postgres|postgresql|pgsql)://(?:.*@)?)"
    r"(?P<hosts>(?P<first>[^@/?,]*),[^@/?]*)(?P<tail>[/?].*|)$"
)
# `host`, `host:port`, `[v6]` or `[v6]:port`.
HOST_AND_PORT = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]+))(?::(?P<port>[^:]*))?$")
# libpq's target_session_attrs values that can reach a server taking writes;
# a host list needs one that refuses the others (a standby fails every write).
WRITABLE_SESSIONS = {"any", "read-write", "primary"}
WRITE_ONLY_SESSIONS = {"read-write", "primary"}
# libpq options a host list gets unless its URL sets them. A failover is
# also a machine that vanished without a word: without these a connection
# attempt to it waits 130 s before the next server is tried (psycopg's
# default), and a query sent on a connection to it about 15 minutes of TCP
# retransmissions, while the loop and the web's database threads wait.
FAILOVER_OPTIONS = {
    "connect_timeout": 3,  # seconds per server tried
    "keepalives": 1,
    # An idle connection (the LISTEN one) to a lost machine ends within 25 s.
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    # Milliseconds sent data may stay unacknowledged before the connection
    # is given up: a query to a lost machine fails in 10 s.
    "tcp_user_timeout": 10000,
}


def database_from_url(url: str, setting: str = "DATABASE_URL") -> dict[str, Any]:
    """The DATABASES entry `url` describes; a mistake raises
    ImproperlyConfigured naming `setting` and never the password."""
    shown = redacted(url)
    hosts = host_list(url, setting, shown)
    try:
        # dj-database-url reads one server: the rest of a host list's URL is
        # read with its first server alone.
        first_only = HOST_LIST_IN_URL.sub(r"\g<head>\g<first>\g<tail>", url)
        config = dj_database_url.parse(first_only, conn_max_age=0)
    except Exception as e:  # dj-database-url raises several types for bad URLs
        raise ImproperlyConfigured(
            f"{setting}: cannot parse {shown!r}: {redacted(str(e))}"
        ) from None
    engine = config.get("ENGINE")
    if engine not in SUPPORTED_ENGINES:
        raise ImproperlyConfigured(
            f"{setting}: unsupported scheme in {shown!r} (use sqlite:/// or postgres://)"
        )
    if engine == "django.db.backends.sqlite3":
        if not config.get("NAME"):
            raise ImproperlyConfigured(f"{setting}: no SQLite file path in {shown!r}")
        # Django's, but for the tick's eager write lock (croniq_project/sqlite).
        config["ENGINE"] = "croniq_project.sqlite"
        config["OPTIONS"] = {
            # IMMEDIATE takes the write lock at BEGIN, so two processes never
            # deadlock upgrading read locks; the busy timeout makes them wait.
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": (
                "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA busy_timeout=20000;"
            ),
        }
        config["TEST"] = {"NAME": None}
    else:
        if not config.get("NAME"):
            raise ImproperlyConfigured(f"{setting}: no database name in {shown!r}")
        config.setdefault("OPTIONS", {})
        check_session_attrs(config["OPTIONS"], hosts, setting, shown)
        if hosts is not None:
            config["HOST"] = ",".join(host for host, _ in hosts)
            # libpq: one port for all, or one each (empty: the default port).
            ports = [port for _, port in hosts]
            config["PORT"] = ",".join(ports) if any(ports) else ""
            config["OPTIONS"] = {**FAILOVER_OPTIONS, **config["OPTIONS"]}
        config["CONN_HEALTH_CHECKS"] = True
    return config


def host_list(url: str, setting: str, shown: str) -> list[tuple[str, str]] | None:
    """[(host, port)] of a URL naming several servers (port "" when not
    given), or None for one server."""
    match = HOST_LIST_IN_URL.match(url)
    if match is None:
        return None
    hosts = []
    for entry in match["hosts"].split(","):
        part = HOST_AND_PORT.match(entry)
        port = (part["port"] or "") if part else ""
        if part is None or (port and not (port.isdigit() and 0 < int(port) < 65536)):
            raise ImproperlyConfigured(
                f"{setting}: {entry!r} in the host list of {shown!r} is not host or host:port"
            )
        # A socket directory is written percent-encoded (%2Frun%2Fpostgresql).
        hosts.append((unquote(part["v6"] or part["host"]), port))
    return hosts


def check_session_attrs(
    options: dict[str, Any], hosts: list[tuple[str, str]] | None, setting: str, shown: str
) -> None:
    """Croniq writes on every connection: a session libpq may open on a
    standby is refused here rather than failing each write later."""
    attrs = options.get("target_session_attrs")
    if attrs is not None and attrs not in WRITABLE_SESSIONS:
        raise ImproperlyConfigured(
            f"{setting}: target_session_attrs={attrs} in {shown!r} would reach a standby, "
            f"where Croniq cannot write (use read-write)"
        )
    if hosts is not None and attrs not in WRITE_ONLY_SESSIONS:
        raise ImproperlyConfigured(
            f"{setting}: {shown!r} names several servers: add target_session_attrs=read-write, "
            "or a connection may land on a standby, where Croniq cannot write"
        )
