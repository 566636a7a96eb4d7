"""DATABASE_URL -> Django DATABASES entry, with Croniq's per-backend tuning."""

import re
from typing import Any

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


def database_from_url(url: str) -> dict[str, Any]:
    shown = redacted(url)
    try:
        config = dj_database_url.parse(url, conn_max_age=0)
    except Exception as e:  # dj-database-url raises several types for bad URLs
        raise ImproperlyConfigured(
            f"DATABASE_URL: cannot parse {shown!r}: {redacted(str(e))}"
        ) from None
    engine = config.get("ENGINE")
    if engine not in SUPPORTED_ENGINES:
        raise ImproperlyConfigured(
            f"DATABASE_URL: unsupported scheme in {shown!r} (use sqlite:/// or postgres://)"
        )
    if engine == "django.db.backends.sqlite3":
        if not config.get("NAME"):
            raise ImproperlyConfigured(f"DATABASE_URL: no SQLite file path in {shown!r}")
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
            raise ImproperlyConfigured(f"DATABASE_URL: no database name in {shown!r}")
        config.setdefault("OPTIONS", {})
        config["CONN_HEALTH_CHECKS"] = True
    return config
