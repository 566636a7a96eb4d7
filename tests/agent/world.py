"""Arrange and inspect an end-to-end database through `manage.py shell`.

The agent tests run the server in its own process on its own database, so
they create jobs and read results the way an operator's script would.
"""

import atexit
import contextlib
import json
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from datetime import UTC, datetime

import requests

from harness.processes import ROOT, Server, process_env, query

PRELUDE = """
import json
from datetime import timedelta
from django.utils import timezone
from runners.models import RunnerToken, Runner
from scheduler.models import Job, Execution, LogChunk
now = timezone.now()
def out(value):
    print("RESULT:" + json.dumps(value, default=str))
"""


# What a kept `manage.py shell` runs: each line it reads is one call (JSON:
# the database's URL and the code), its code run in a namespace of its own;
# it answers DONE or ERROR and the traceback, and closes its connections, so
# none is held between calls (a database restarted or dropped by the test
# meanwhile is no matter). A call on another database than the last points
# the connection at it, read as the settings read DATABASE_URL: every test
# has a database of its own, and one shell serves them all.
SERVE = """
imported = dict(globals())  # what `manage.py shell -c` gives code: the models
import json, sys, traceback
from django.db import connections
from croniq_project.database import database_from_url
from croniq_project.pooling import pooler_safe
current = None
for line in sys.stdin:
    try:
        call = json.loads(line)
        if call["db"] != current:
            connections["default"].close()
            connections["default"].settings_dict.update(pooler_safe(database_from_url(call["db"])))
            current = call["db"]
        exec(call["code"], dict(imported))
        print("DONE:", flush=True)
    except BaseException:
        print("ERROR:" + json.dumps(traceback.format_exc()), flush=True)
    finally:
        connections.close_all()
"""
# The `manage.py shell` processes kept, the newest last: one serves every
# database in an environment, and a test that sets one (a secrets key)
# starts another.
KEPT = 2
CALL_TIMEOUT = 120.0


class Shell:
    """A `manage.py shell`, kept running between calls: a call costs its
    queries, not a process start (Django's set-up, about a second of CPU,
    which some 300 calls a CI run paid each, then one start per test's
    database: 231)."""

    def __init__(self, env):
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self.popen = subprocess.Popen(
            # -v 0: no line saying what it imported before the first answer.
            [sys.executable, str(ROOT / "manage.py"), "shell", "-v", "0", "-c", SERVE],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        self.lock = threading.Lock()

    def run(self, db, code):
        """The lines `code` printed, run on database `db`; AssertionError if
        it raised, or if the process died or took longer than CALL_TIMEOUT."""
        with self.lock:
            assert self.popen.stdin is not None and self.popen.stdout is not None
            stuck = threading.Timer(CALL_TIMEOUT, self.popen.kill)
            stuck.start()
            try:
                self.popen.stdin.write(json.dumps({"db": db, "code": code}) + "\n")
                self.popen.stdin.flush()
                lines = []
                for line in self.popen.stdout:
                    if line.startswith("DONE:"):
                        return lines
                    if line.startswith("ERROR:"):
                        raise AssertionError(json.loads(line[len("ERROR:") :]))
                    lines.append(line)
            except BrokenPipeError:
                pass
            finally:
                stuck.cancel()
        self.log.seek(0)
        raise AssertionError(f"manage.py shell ended:\n{self.log.read().decode(errors='replace')}")

    def close(self):
        with contextlib.suppress(OSError):
            self.popen.stdin.close()
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        self.log.close()


# By the environment they were started with, but for the database's URL,
# which each call names: what a test has set (a secrets key) starts another.
_shells: dict[tuple[tuple[str, str], ...], Shell] = {}


def shell(db):
    """The kept Shell for `db`'s environment, started if need be; the oldest
    is closed when more than KEPT would be running."""
    env = process_env(db)
    key = tuple(sorted((name, value) for name, value in env.items() if name != "DATABASE_URL"))
    if key in _shells and _shells[key].popen.poll() is None:
        _shells[key] = _shells.pop(key)  # newest last
        return _shells[key]
    if key in _shells:
        _shells.pop(key).close()
    while len(_shells) >= KEPT:
        _shells.pop(next(iter(_shells))).close()
    _shells[key] = Shell(env)
    return _shells[key]


@atexit.register
def close_shells():
    while _shells:
        _shells.popitem()[1].close()


def python(db, code):
    """What `code` printed, run as `manage.py shell -c` would run it (the
    models imported) on database `db`, in the kept shell."""
    return "".join(shell(db).run(db, textwrap.dedent(code)))


def django(db, code):
    """Run `code` in the server's Django; returns what it passed to out()."""
    lines = shell(db).run(db, PRELUDE + textwrap.dedent(code))
    for line in lines:
        if line.startswith("RESULT:"):
            return json.loads(line[len("RESULT:") :])
    raise AssertionError("no result from manage.py shell:\n" + "".join(lines))


def issue_token(db, name="agent"):
    return django(db, f"out(RunnerToken.issue({name!r})[1])")


ADD_EXECUTIONS = """
ids = []
for spec in {specs!r}:
    job, _ = Job.objects.update_or_create(
        name=spec.pop("job"), defaults=dict(schedule="0 0 1 1 *", **spec)
    )
    ids.append(Execution.objects.create(
        job=job, scheduled_for=now, singleton=job.singleton, run_after=now, created_at=now
    ).pk)
out(ids)
"""


def normalise(specs):
    defaults = dict(labels=[], singleton=False, timeout=None, env={})
    return [{**defaults, **spec} for spec in specs]


def add_executions(db, *specs):
    """Pending executions due now, one per spec (a dict with job, command and
    optionally labels, singleton, timeout, env); jobs are created as needed.
    Returns their ids, in one manage.py call."""
    return django(db, ADD_EXECUTIONS.format(specs=normalise(specs)))


def token_and_executions(db, token_name, *specs):
    """issue_token() and add_executions() in one manage.py call."""
    code = ADD_EXECUTIONS.format(specs=normalise(specs)).replace(
        "out(ids)", f"out([RunnerToken.issue({token_name!r})[1], ids])"
    )
    return django(db, code)


def add_execution(db, job, command, **options):
    [execution_id] = add_executions(db, dict(job=job, command=command, **options))
    return execution_id


EXECUTION_COLUMNS = [
    "id",
    "job",
    "state",
    "attempt",
    "exit_code",
    "error",
    "lease",
    "lost_reason",
    "lease_expires_at",
    "claimed_at",
    "finished_at",
]
TIMESTAMPS = ("lease_expires_at", "claimed_at", "finished_at")


def timestamp(value):
    """Unix time from a stored datetime (SQLite gives naive UTC text)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def executions(db, *jobs):
    """Every execution of `jobs`, oldest first, with its log joined in seq
    order; read with plain SQL, as cheap as a wait_for predicate must be."""
    names = ", ".join(["%s"] * len(jobs))
    rows = query(
        db,
        "SELECT e.id, j.name, e.state, e.attempt, e.exit_code, e.error, e.lease, e.lost_reason,"
        " e.lease_expires_at, e.claimed_at, e.finished_at"
        " FROM scheduler_execution e JOIN scheduler_job j ON j.id = e.job_id"
        f" WHERE j.name IN ({names}) ORDER BY e.id",
        jobs,
    )
    found = [dict(zip(EXECUTION_COLUMNS, row, strict=True)) for row in rows]
    for execution in found:
        for column in TIMESTAMPS:
            execution[column] = timestamp(execution[column])
        chunks = query(
            db,
            "SELECT seq, data FROM scheduler_logchunk WHERE execution_id = %s ORDER BY seq",
            (execution["id"],),
        )
        execution["seqs"] = [seq for seq, _ in chunks]
        execution["log"] = "".join(data for _, data in chunks)
    return found


def request_cancel(db, execution_id):
    """What the admin's cancel action does: scheduler.runs.operations.cancel, by an
    operator account. Returns how many executions it asked to stop."""
    return django(
        db,
        f"""
        from django.contrib.auth import get_user_model
        from scheduler.runs import operations
        operator, _ = get_user_model().objects.get_or_create(
            username="operator", defaults=dict(is_staff=True, is_superuser=True)
        )
        out(operations.cancel(Execution.objects.filter(pk={execution_id}), now, operator))
        """,
    )


def start_server(db, log_path, port=None, **env):
    """A running Server; see ready()."""
    return ready(Server(db, log_path, port=port, **env))


def ready(server, timeout=60):
    """Wait for a spawned Server (start it, do other set-up, then wait).
    Unlike Server.wait_ready() this also rides out a first /healthz slower
    than a 1 s read timeout on a busy machine."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"server exited:\n{server.output()}")
        try:
            if requests.get(server.url + "/healthz", timeout=5).status_code == 200:
                return server
        except requests.RequestException:
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"server not ready after {timeout}s:\n{server.output()}")
