"""Start Croniq's real processes for end-to-end tests and benchmarks.

Each test gets its own database: a temporary SQLite file, or a fresh
PostgreSQL database when the suite runs against PostgreSQL.
"""

import atexit
import os
import random
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import closing
from pathlib import Path

import requests
from django.conf import settings

from harness.runner_venv import runner_venv

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def on_postgres():
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def free_port():
    """A port nothing listens on, for a server the test starts next.

    Chosen at random below the kernel's ephemeral range, not by binding port
    0: the ports bind(0) hands out are the ones outgoing connections take as
    their local port, so one freed here could become a client's before the
    server bound it (seen with four test runs at once: "address already in
    use"). Below that range only an explicit bind takes a port.
    """
    low = ephemeral_ports()[0]
    for _ in range(200):
        port = random.randrange(max(1024, low - 12_000), low)
        with closing(socket.socket()) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (or lingering): try another
            return port
    raise RuntimeError("no free port found below the ephemeral range")


def ephemeral_ports():
    """The kernel's range of local ports for outgoing connections."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def postgres_admin_url():
    db = settings.DATABASES["default"]
    user = db.get("USER") or "postgres"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{user}@{host}:{port}"


def create_database(tmp_path):
    """A new empty database URL for the backend the suite runs on."""
    if not on_postgres():
        return f"sqlite:///{tmp_path / 'croniq-e2e.sqlite3'}"
    import psycopg

    name = f"croniq_e2e_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_admin_url() + "/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{postgres_admin_url()}/{name}"


_template = {}


def migrated_database(tmp_path):
    """A new database with every migration applied.

    The first call of a test session migrates one template database with a
    real `manage.py migrate`; every call copies it (SQLite: the backup API;
    PostgreSQL: CREATE DATABASE ... TEMPLATE), which takes milliseconds
    where a migrate process takes seconds of CPU.
    """
    if not _template:
        folder = Path(tempfile.mkdtemp(prefix="croniq-template-"))
        url = create_database(folder)
        manage(url, "migrate", "--no-input")
        _template["url"] = url
        atexit.register(drop_template, url, folder)
    return copy_database(_template["url"], tmp_path / "croniq-e2e.sqlite3", "croniq_e2e")


def copy_database(template: str, sqlite_file: Path, postgres_prefix: str) -> str:
    """A copy of the database at `template`: at `sqlite_file` on SQLite (the
    backup API), a new database named `postgres_prefix` and a random tail on
    PostgreSQL (CREATE DATABASE ... TEMPLATE; nothing may be connected to
    the template meanwhile)."""
    if not on_postgres():
        source = sqlite3.connect(template.removeprefix("sqlite:///"))
        with closing(source), closing(sqlite3.connect(sqlite_file)) as target:
            source.backup(target)
        return f"sqlite:///{sqlite_file}"
    import psycopg

    name = f"{postgres_prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_admin_url() + "/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template.rsplit("/", 1)[1]}"')
    return f"{postgres_admin_url()}/{name}"


def drop_template(url, folder):
    drop_database(url)
    shutil.rmtree(folder, ignore_errors=True)


def drop_database(url):
    if not url.startswith("postgres"):
        return
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_admin_url() + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def process_env(database_url, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRONIQ_TEST", "PYTEST"))}
    env.update(
        DATABASE_URL=database_url,
        SECRET_KEY="croniq-e2e-key",
        DEBUG="0",
        PYTHONUNBUFFERED="1",
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


def manage(database_url, *args, check=True, **extra_env):
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=process_env(database_url, **extra_env),
        capture_output=True,
        text=True,
        check=check,
        timeout=120,
    )


class Process:
    """A child process whose output goes to a file the test can read."""

    def __init__(self, args, env, log_path):
        self.args = args
        self.log_path = log_path
        self.log = open(log_path, "ab")  # noqa: SIM115 (lives as long as the process)
        self.popen = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT
        )

    def output(self):
        return Path(self.log_path).read_text(errors="replace")

    def alive(self):
        return self.popen.poll() is None

    # How long a process asked to stop (SIGTERM) has before SIGKILL. A loop
    # may take notifications.notifier_process.STOP_TIMEOUT (10 s) for its
    # notifier alone, and on a loaded machine its own exit comes after: a
    # stop that is waited out here is the process's, not a hang. One that
    # never comes still ends as -9, which the tests assert against.
    STOP_PATIENCE = 30.0

    def stop(self, timeout=STOP_PATIENCE):
        if self.alive():
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.log.close()
        return self.popen.returncode

    def kill(self):
        if self.alive():
            self.popen.kill()
            self.popen.wait()
        self.log.close()


class Server(Process):
    def __init__(self, database_url, log_path, port=None, **extra_env):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__(self.command(), process_env(database_url, **extra_env), log_path)

    def command(self):
        return [
            str(BIN / "uvicorn"),
            "croniq_project.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--no-access-log",
        ]

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                self.kill()
                raise RuntimeError(f"server exited:\n{self.output()}")
            try:
                if requests.get(self.url + "/healthz", timeout=5).status_code == 200:
                    return self
            except requests.RequestException:
                pass  # not listening yet, or too busy starting to answer in time
            time.sleep(0.1)
        self.kill()  # never leave an unready server running behind a failed test
        raise RuntimeError(f"server not ready after {timeout}s:\n{self.output()}")


class OneProcess(Server):
    """`manage.py serve`: the web server and the scheduler loop in one process."""

    def __init__(self, database_url, log_path, *loop_args, port=None, **extra_env):
        self.loop_args = loop_args
        super().__init__(database_url, log_path, port=port, **extra_env)

    def command(self):
        return [
            sys.executable,
            str(ROOT / "manage.py"),
            "serve",
            "--port",
            str(self.port),
            *self.loop_args,
        ]


# How the web server and the scheduler loop run (the `layout` fixture).
LAYOUTS = ["split", "serve"]


def start_web_and_loop(layout, database_url, tmp_path, *loop_args, **extra_env):
    """The web server (ready) and every process started: uvicorn and
    scheduler_loop apart ("split"), or one `serve` process ("serve")."""
    if layout == "serve":
        server = OneProcess(database_url, tmp_path / "serve.log", *loop_args, **extra_env)
        return server.wait_ready(), [server]
    server = Server(database_url, tmp_path / "web.log", **extra_env).wait_ready()
    loop = start_loop(database_url, tmp_path / "loop.log", *loop_args, **extra_env)
    return server, [server, loop]


def start_loop(database_url, log_path, *args, **extra_env):
    return Process(
        [sys.executable, str(ROOT / "manage.py"), "scheduler_loop", *args],
        process_env(database_url, **extra_env),
        log_path,
    )


def start_agent(server_url, token, log_path, *args, **extra_env):
    """croniq-runner as installed from its wheel (harness/runner_venv.py)."""
    # Ledgers of the agent's jobs live beside its log, not in root's home.
    extra_env.setdefault("XDG_STATE_HOME", Path(log_path).parent / "agent-state")
    # No container engine unless a test asks for one (tests/docker): whether
    # this machine's docker answers would otherwise decide an agent's labels.
    extra_env.setdefault("CRONIQ_ENGINE", "none")
    env = agent_env(process_env("sqlite:////nonexistent", **extra_env))
    return Process(
        [str(runner_venv() / "croniq-runner"), "--server", server_url, "--token", token, *args],
        env,
        log_path,
    )


def agent_env(env):
    """An agent's environment: its wheel's code alone, whatever PYTHONPATH
    the suite runs with (a checkout's runner/ put first would replace it)."""
    return {k: v for k, v in env.items() if k != "PYTHONPATH"}


def wait_for(predicate, timeout=20, interval=0.05, message="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


def query(database_url, sql, params=()):
    """Rows from the e2e database, read from outside the processes under test."""
    if database_url.startswith("sqlite"):
        import sqlite3

        path = database_url.removeprefix("sqlite:///")
        with closing(sqlite3.connect(path, timeout=20)) as conn:
            return conn.execute(sql.replace("%s", "?"), params).fetchall()
    import psycopg

    with psycopg.connect(database_url.replace("postgres://", "postgresql://")) as conn:
        return conn.execute(sql, params).fetchall()
