"""A PostgreSQL primary and a streaming standby on this machine, so a test can
kill the primary and promote the standby (docs/design.md §16).

Both are private servers (harness/private_postgres.py) at two fixed ports, so
one multi-host URL (`url`) reaches whichever takes writes, before and after a
failover, as libpq's host list does in production. The standby is a base
backup of the primary (`pg_basebackup -R`), streaming from it, and commits
wait for it (`synchronous_standby_names = '*'`, `synchronous_commit = on`):
what the primary acknowledged is on the standby when the primary dies.

- `kill_primary()`: SIGKILL of the postmaster and every process it started,
  as a server crashing: nothing is flushed, nothing is sent, and its port
  refuses connections. With `unreachable=True` its port also drops every
  packet first (iptables), as a machine losing power: a client's query or
  connection attempt hangs until its own timeouts give up.
- `promote()`: `pg_ctl promote` of the standby, returning once it takes
  writes. It commits alone (asynchronously) until it has a standby of its
  own: a primary that waits for a standby that is not there stops.
- `rebuild_standby()`: a new standby from the new primary, at the dead
  primary's port, synchronous again: the pair is ready for another failover.

`start()`, `stop()`, `wait_ready()`, `url` and `destroy()` are those of
PrivatePostgres, for the pair: the first start builds the standby, a later
stop and start restart the primary (its standby reconnects), so the chaos
suite runs on a pair as on one server (CRONIQ_CHAOS_REPLICA=1).

Every step waits for the state it needs (the port refuses connections, the
standby streams, the promoted server takes writes); none sleeps for it.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from harness.private_postgres import PrivatePostgres, as_postgres
from harness.processes import free_port

READY_TIMEOUT = 60.0
# A standby's own settings, after everything its base backup copied: once
# promoted it has no standby, so it must not wait for one; while it streams,
# a restarted primary is asked again within half a second (not 5 s: its
# commits wait for the standby meanwhile).
STANDBY_SETTINGS = "\nsynchronous_standby_names = ''\nwal_retrieve_retry_interval = '500ms'\n"


class ReplicaPair:
    def __init__(self) -> None:
        self.primary: PrivatePostgres | None = PrivatePostgres(free_port())
        self.standby: PrivatePostgres | None = None
        self.dead: PrivatePostgres | None = None
        self.ports = (self.primary.port, free_port())
        self.failovers = 0
        self.dropped: list[int] = []  # ports whose packets iptables drops

    def start(self) -> None:
        """Start the primary; the first time, build its standby too."""
        self.primary.start()
        if self.standby is None and self.dead is None:
            self.primary.wait_ready()
            self.standby = self.new_standby(self.ports[1])

    def stop(self) -> None:
        """Stop the primary (fast): its standby waits for it to come back."""
        self.primary.stop()

    def wait_ready(self) -> None:
        self.primary.wait_ready()

    @property
    def url(self) -> str:
        return self.database_url("postgres")

    def database_url(self, database: str) -> str:
        """The URL Croniq gets: both servers, the one that takes writes wins."""
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.ports)
        return f"postgres://postgres@{hosts}/{database}?target_session_attrs=read-write"

    def primary_url(self, database: str = "postgres") -> str:
        """The primary alone: the harness's own reads, which must not wait
        on a lost machine's timeouts as the processes under test do."""
        return node_url(self.primary.port, database)

    def create_database(self, name: str, schema_from: str | None = None) -> str:
        """A new database on the primary (the standby follows); with
        `schema_from`, a copy of that database (another server's migrated
        template: `pg_dump | psql` takes a second where `migrate` takes many)."""
        execute(self.primary.port, f'CREATE DATABASE "{name}"')
        if schema_from is not None:
            dump = subprocess.run(
                [str(self.primary.bin / "pg_dump"), "--no-owner", "-d", libpq(schema_from)],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            subprocess.run(
                [str(self.primary.bin / "psql"), "-q", "-v", "ON_ERROR_STOP=1",
                 "-d", libpq(node_url(self.primary.port, name))],
                input=dump.stdout, check=True, capture_output=True, timeout=120,
            )  # fmt: skip
        return self.database_url(name)

    def new_standby(self, port: int) -> PrivatePostgres:
        """A standby of the primary at `port`, streaming; the primary's
        commits wait for it from now on."""
        standby = PrivatePostgres(port, initdb=False)
        source = f"host=127.0.0.1 port={self.primary.port} user=postgres"
        as_postgres(
            [str(standby.bin / "pg_basebackup"), "-D", str(standby.data), "-d", source,
             "-R", "-X", "stream", "-c", "fast"]
        )  # fmt: skip
        auto_conf = standby.data / "postgresql.auto.conf"
        auto_conf.write_text(auto_conf.read_text() + STANDBY_SETTINGS)
        standby.start()
        standby.wait_ready()
        execute(self.primary.port, "ALTER SYSTEM SET synchronous_standby_names = '*'")
        execute(self.primary.port, "ALTER SYSTEM SET synchronous_commit = 'on'")
        execute(self.primary.port, "SELECT pg_reload_conf()")
        wait(lambda: self.synchronous_standbys() == 1, "the standby to stream synchronously")
        return standby

    def synchronous_standbys(self) -> int:
        rows = query(
            self.primary.port,
            "SELECT count(*) FROM pg_stat_replication"
            " WHERE state = 'streaming' AND sync_state = 'sync'",
        )
        return rows[0][0]

    def kill_primary(self, unreachable: bool = False) -> float:
        """SIGKILL the primary and its processes; returns when (time.time())."""
        if unreachable:
            drop_packets(self.primary.port)
            self.dropped.append(self.primary.port)
        killed_at = kill_server(self.primary, wait_refused=not unreachable)
        self.dead, self.primary = self.primary, None
        return killed_at

    def promote(self) -> None:
        """Promote the standby; returns once it takes writes."""
        standby, self.standby = self.standby, None
        as_postgres([str(standby.bin / "pg_ctl"), "promote", "-w", "-D", str(standby.data)])
        wait(lambda: takes_writes(standby.port), "the promoted standby to take writes")
        self.primary = standby
        self.failovers += 1

    def rebuild_standby(self) -> None:
        """A new standby of the new primary where the dead primary was."""
        dead, self.dead = self.dead, None
        forget(dead)
        if dead.port in self.dropped:
            self.dropped.remove(dead.port)
            drop_packets(dead.port, undo=True)
        self.standby = self.new_standby(dead.port)

    def destroy(self) -> None:
        for server in (self.primary, self.standby):
            if server is not None:
                server.destroy()
        if self.dead is not None:
            forget(self.dead)
        for port in self.dropped:
            drop_packets(port, undo=True)
        self.dropped = []


def kill_server(server: PrivatePostgres, wait_refused: bool = True) -> float:
    """SIGKILL a server's postmaster and every process it started (each a
    process group of its own), then wait until its port refuses connections."""
    pid = int((server.data / "postmaster.pid").read_text().split()[0])
    os.kill(pid, signal.SIGSTOP)  # it starts no process more
    children = subprocess.run(
        ["pgrep", "-P", str(pid)], capture_output=True, text=True
    ).stdout.split()
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(child), signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    for process in [pid, *map(int, children)]:
        wait(lambda process=process: gone(process), f"process {process} to end")
    if wait_refused:
        wait(lambda: not answers(server.port), f"port {server.port} to refuse connections")
    return killed_at


def gone(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie has: it holds no socket)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def can_drop_packets() -> bool:
    """Whether this machine lets the harness drop packets (iptables, as root)."""
    return os.geteuid() == 0 and shutil.which("iptables") is not None


def drop_packets(port: int, undo: bool = False) -> None:
    """Drop every packet to and from local TCP `port` (or stop dropping):
    no reset, no refusal, as a machine that lost power. The rules name
    Croniq's harness, so a leftover one is found by its comment."""
    action = "-D" if undo else "-I"
    comment = ["-m", "comment", "--comment", f"croniq-harness-{port}"]
    for chain, direction in (("INPUT", "--dport"), ("OUTPUT", "--sport")):
        rule = [chain, "-p", "tcp", direction, str(port), *comment, "-j", "DROP"]
        subprocess.run(["iptables", action, *rule], check=not undo, capture_output=True)


def forget(server: PrivatePostgres) -> None:
    """Remove a killed server: its shared memory segment (a clean stop
    removes it; SIGKILL leaves it) and its files."""
    lines = (server.data / "postmaster.pid").read_text().splitlines()
    if len(lines) > 6 and len(lines[6].split()) == 2:
        subprocess.run(["ipcrm", "-m", lines[6].split()[1]], capture_output=True)
    shutil.rmtree(server.dir, ignore_errors=True)


def node_url(port: int, database: str = "postgres") -> str:
    return f"postgres://postgres@127.0.0.1:{port}/{database}"


def libpq(url: str) -> str:
    return url.replace("postgres://", "postgresql://", 1)


def execute(port: int, sql: str) -> None:
    import psycopg

    with psycopg.connect(libpq(node_url(port)), autocommit=True) as conn:
        conn.execute(sql)


def query(port: int, sql: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(libpq(node_url(port)), autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def answers(port: int) -> bool:
    import psycopg

    try:
        psycopg.connect(libpq(node_url(port)), connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


def takes_writes(port: int) -> bool:
    import psycopg

    try:
        return query(port, "SELECT NOT pg_is_in_recovery()")[0][0]
    except psycopg.OperationalError:
        return False


def wait(predicate, what: str, timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)
