"""PgBouncer in transaction pooling mode in front of a PostgreSQL server, for
tests and benches (docs/design.md §16: Croniq runs behind one).

Debian's `pgbouncer` package; it refuses to run as root, so it runs as the
postgres user when the harness is root. Every database of the server is
reachable through it under its own name (`url_for`).

    with pgbouncer(direct_url) as bouncer:
        pooled_url = bouncer.url_for(direct_url)
"""

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote, urlsplit, urlunsplit

from harness.processes import free_port

PGBOUNCER = "/usr/sbin/pgbouncer"


def pgbouncer_bin() -> str | None:
    """Where the pgbouncer binary is, or None (the package is not installed)."""
    return shutil.which("pgbouncer") or (PGBOUNCER if os.path.exists(PGBOUNCER) else None)


def as_postgres() -> dict[str, Any]:
    """Popen arguments that run the child as the postgres user when we are root."""
    if os.geteuid() != 0:
        return {}
    return {"user": "postgres", "group": "postgres", "extra_groups": []}


class PgBouncer:
    """One pgbouncer process in front of the server of `server_url`
    (postgres://user[:password]@host:port[/anything])."""

    def __init__(self, server_url: str, pool_size: int = 20) -> None:
        server = urlsplit(server_url)
        self.user = unquote(server.username or "postgres")
        self.password = unquote(server.password or "")
        self.host = server.hostname or "127.0.0.1"
        self.server_port = server.port or 5432
        self.pool_size = pool_size
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="croniq-pgbouncer-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.log: IO[bytes] | None = None

    def url_for(self, database_url: str) -> str:
        """`database_url` (a database of the same server) through the pooler."""
        parts = urlsplit(database_url)
        credentials = parts.netloc.rpartition("@")[0]
        netloc = f"{credentials}@127.0.0.1:{self.port}" if credentials else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def config(self) -> str:
        password = f" password={self.password}" if self.password else ""
        return "\n".join(
            [
                "[databases]",
                # Any database name: the server's database of that name.
                f"* = host={self.host} port={self.server_port}{password}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {self.port}",
                "unix_socket_dir =",
                "pool_mode = transaction",
                "auth_type = trust",
                f"auth_file = {self.dir / 'users.txt'}",
                f"admin_users = {self.user}",
                f"default_pool_size = {self.pool_size}",
                "max_client_conn = 1000",
                # A server that restarts (the chaos suite) is tried again
                # after a second, not the default 15.
                "server_login_retry = 1",
                "ignore_startup_parameters = extra_float_digits",
                "",
            ]
        )

    def start(self) -> "PgBouncer":
        (self.dir / "pgbouncer.ini").write_text(self.config())
        (self.dir / "users.txt").write_text(f'"{self.user}" "{self.password}"\n')
        if os.geteuid() == 0:
            for path in (self.dir, *self.dir.iterdir()):
                shutil.chown(path, "postgres", "postgres")
        binary = pgbouncer_bin()
        if binary is None:
            raise RuntimeError("pgbouncer is not installed (apt-get install pgbouncer)")
        self.log = open(self.dir / "pgbouncer.log", "ab")  # noqa: SIM115 (lives as long as the process)
        self.process = subprocess.Popen(
            [binary, str(self.dir / "pgbouncer.ini")],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            **as_postgres(),
        )
        return self

    def output(self) -> str:
        path = self.dir / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_ready(self, database: str = "postgres", timeout: float = 30) -> "PgBouncer":
        """Once a query through the pooler reaches `database` on the server."""
        import psycopg

        url = self.url_for(f"postgresql://{self.user}@x/{database}")
        password = self.password or None
        deadline = time.monotonic() + timeout
        while True:
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited:\n{self.output()}")
            try:
                with psycopg.connect(url, password=password, connect_timeout=5) as conn:
                    conn.execute("SELECT 1")
                return self
            except psycopg.OperationalError as error:
                if time.monotonic() > deadline:
                    output = self.output()
                    self.stop()
                    message = f"pgbouncer not ready after {timeout}s:\n{output}"
                    raise RuntimeError(message) from error
                time.sleep(0.05)

    def show(self, what: str) -> list[dict[str, Any]]:
        """The rows of the admin console's `SHOW <what>` (STATS, POOLS, SERVERS...)."""
        import psycopg

        url = self.url_for(f"postgresql://{self.user}@x/pgbouncer")
        # The console speaks only the simple query protocol: a client-side cursor.
        with psycopg.connect(
            url,
            password=self.password or None,
            autocommit=True,
            cursor_factory=psycopg.ClientCursor,
        ) as conn:
            cursor = conn.execute(f"SHOW {what}")
            names = [column.name for column in cursor.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def transactions(self, database: str) -> int:
        """How many transactions went through the pooler to `database`."""
        rows = [row for row in self.show("STATS") if row["database"] == database]
        return int(rows[0]["total_xact_count"]) if rows else 0

    def stop(self, timeout: float = 10) -> None:
        """A safe shutdown (SIGINT: it waits for the transactions in flight),
        then an immediate one (SIGTERM), then SIGKILL."""
        if self.process is not None:
            for how in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    self.process.send_signal(how)
                try:
                    self.process.wait(timeout)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def pgbouncer(server_url: str, pool_size: int = 20) -> Iterator[PgBouncer]:
    """A started, ready PgBouncer in front of `server_url`'s server, stopped after."""
    bouncer = PgBouncer(server_url, pool_size).start()
    try:
        yield bouncer.wait_ready()
    finally:
        bouncer.stop()
