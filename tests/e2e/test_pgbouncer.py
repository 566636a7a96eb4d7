"""Croniq behind PgBouncer in transaction pooling mode (docs/design.md §16),
as real processes: uvicorn, scheduler_loop and an agent, DATABASE_URL
through the pooler and CRONIQ_LISTEN_DATABASE_URL straight to the server.

Through a transaction pooler a LISTEN hears nothing (the server session
that ran it goes to other clients), and the web process's hub would learn
of new work only from its safety scan. The LISTEN connection must be the
direct one, and the work the loop creates must reach a waiting agent at
its instant, well inside that scan's interval.
"""

import datetime as dt
import os
import re
import statistics
from pathlib import Path

import pytest
import yaml

from dispatch.hub import LISTENING_SAFETY_SCAN_INTERVAL
from harness.pgbouncer import pgbouncer, pgbouncer_bin
from harness.processes import (
    Server,
    create_database,
    drop_database,
    manage,
    migrated_database,
    on_postgres,
    postgres_admin_url,
    query,
    start_agent,
    start_loop,
    wait_for,
)
from scheduler.firing.job_edits import CHANNEL as JOBS_CHANNEL

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not on_postgres(), reason="a transaction pooler fronts PostgreSQL"),
]

# What a web process whose hub hears no NOTIFY falls back to: a scan for
# work every LISTENING_SAFETY_SCAN_INTERVAL (5 s; a LISTEN through the
# pooler looks up). With a job every second the runs then start in bursts,
# each waiting up to the interval (median 2.4 s in this test with
# CRONIQ_LISTEN_DATABASE_URL through the pooler); heard, tens of
# milliseconds. A fifth of the interval leaves a loaded 2-core machine room.
# The first run is left out: when the loop heard of the job is not measured.
MEDIAN_LIMIT = LISTENING_SAFETY_SCAN_INTERVAL / 5
SAMPLES = 5
LEDGER_COMMAND = 'echo "$CRONIQ_SCHEDULED_FOR $(date +%s.%N)" >> {ledger}'


@pytest.fixture
def bouncer():
    if pgbouncer_bin() is None:
        pytest.skip("pgbouncer is not installed (Debian's package pgbouncer)")
    with pgbouncer(postgres_admin_url()) as running:
        yield running


def listen_sessions(direct_url):
    """(backend pid, client port) of each wake-up listener on the database."""
    name = direct_url.rsplit("/", 1)[1]
    return query(
        direct_url,
        "SELECT pid, client_port FROM pg_stat_activity"
        " WHERE datname = %s AND application_name = 'croniq wakeups'",
        [name],
    )


def local_ports(pid):
    """The local TCP ports of the sockets process `pid` holds open (/proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if found := re.fullmatch(r"socket:\[(\d+)\]", target):
            inodes.add(found[1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def delays(ledger):
    """Seconds from each run's scheduled instant to its start, in order."""
    found = []
    for line in ledger.read_text().splitlines() if ledger.exists() else []:
        instant, started = line.split()
        scheduled = dt.datetime.fromisoformat(instant.replace("Z", "+00:00"))
        found.append(float(started) - scheduled.timestamp())
    return found


SETUP = """
from io import StringIO
from django.core.management import call_command
from runners.models import RunnerToken
call_command("apply", {jobs!r}, stdout=StringIO())
print(RunnerToken.issue("pooled")[1])
"""


def run_cluster(database_url, direct_url, tmp_path, **env):
    """Web, loop and agent on `database_url`, and a job every second,
    enabled once they wait (a job saved in another process: the loop
    hears of it by NOTIFY). Returns the local ports of the web and loop
    processes, the LISTEN sessions, the start delays of SAMPLES runs after
    the first, and the processes' output."""
    ledger = tmp_path / "ledger"
    job = {
        "name": "each-second",
        "schedule": "@every 1s",
        "command": LEDGER_COMMAND.format(ledger=ledger),
        "labels": ["pooled"],
        "enabled": False,
    }
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump({"jobs": [job]}))
    setup = SETUP.format(jobs=str(tmp_path / "jobs.yaml"))
    token = manage(database_url, "shell", "-c", setup, **env).stdout.split()[-1]
    web = Server(database_url, tmp_path / "web.log", **env).wait_ready()
    loop = start_loop(database_url, tmp_path / "loop.log", **env)
    agent = start_agent(web.url, token, tmp_path / "agent.log", "--labels", "pooled")
    processes = [agent, loop, web]
    try:
        wait_for(lambda: len(listen_sessions(direct_url)) >= 2, message="both LISTEN sessions")
        listeners = {process: local_ports(process.popen.pid) for process in (web, loop)}
        wait_for(lambda: query(direct_url, "SELECT 1 FROM runners_runner"), message="the agent")
        enable_jobs(database_url)
        wait_for(lambda: len(delays(ledger)) > SAMPLES, timeout=60, message="the runs")
        sessions = listen_sessions(direct_url)
    finally:
        for process in processes:
            process.stop()
    outputs = "\n".join(process.output()[-2000:] for process in processes)
    return listeners, sessions, delays(ledger)[1 : SAMPLES + 1], outputs


def enable_jobs(database_url):
    """Enable every job from an instant a second or two away, telling
    the loops as `Job.save` does: a NOTIFY on the jobs' channel at the commit."""
    import psycopg

    now = dt.datetime.now(dt.UTC)
    with psycopg.connect(database_url.replace("postgres://", "postgresql://")) as conn:
        conn.execute(
            "UPDATE scheduler_job SET enabled = true, next_run_at = %s, updated_at = %s",
            [now.replace(microsecond=0) + dt.timedelta(seconds=2), now],
        )
        conn.execute(f"NOTIFY {JOBS_CHANNEL}")


def test_behind_pgbouncer_migrations_run_and_wakeups_reach_a_waiting_agent(bouncer, tmp_path):
    direct_url = create_database(tmp_path)
    name = direct_url.rsplit("/", 1)[1]
    pooled_url = bouncer.url_for(direct_url)
    try:
        before = bouncer.transactions(name)
        migrated = manage(pooled_url, "migrate", "--no-input")
        # Each migration is a transaction of its own, through the pooler.
        assert bouncer.transactions(name) - before > 50, migrated.stdout
        listeners, sessions, waited, outputs = run_cluster(
            pooled_url, direct_url, tmp_path, CRONIQ_LISTEN_DATABASE_URL=direct_url
        )
    finally:
        drop_database(direct_url)

    # One LISTEN session per process, each on a socket of that process: a
    # session reached through the pooler would be one of pgbouncer's.
    assert len(sessions) == 2, sessions
    for process, ports in listeners.items():
        assert len(ports & {port for _, port in sessions}) == 1, (process.args, sessions, ports)
    assert_heard(waited, outputs)


def test_without_a_listen_url_the_listen_connection_is_database_urls(tmp_path):
    direct_url = migrated_database(tmp_path)
    try:
        listeners, sessions, waited, outputs = run_cluster(direct_url, direct_url, tmp_path)
    finally:
        drop_database(direct_url)

    assert len(sessions) == 2, sessions
    for process, ports in listeners.items():
        assert len(ports & {port for _, port in sessions}) == 1, (process.args, sessions, ports)
    assert_heard(waited, outputs)


def assert_heard(waited, outputs):
    """The hub heard of the runs the loop created."""
    assert len(waited) == SAMPLES
    assert statistics.median(waited) < MEDIAN_LIMIT, (waited, outputs)
