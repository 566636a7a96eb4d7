"""Overlap policies and concurrency groups with real processes: the web
server(s), the scheduler loop and agents running real jobs, which write
when their bodies start and end.

- replace: each new occurrence stops the running one first; two bodies of
  the job never overlap, and the stopped runs end cancelled.
- A group of 5 jobs with a budget of 2 never runs 3 bodies at once, with
  agents spread over two web processes (PostgreSQL; one on SQLite).
"""

import time

import pytest

from harness.processes import (
    Server,
    drop_database,
    manage,
    migrated_database,
    on_postgres,
    query,
    start_agent,
    start_loop,
    wait_for,
)
from tests.agent.world import issue_token, ready

pytestmark = pytest.mark.e2e

SETTINGS = dict(CRONIQ_HEARTBEAT_INTERVAL=1, CRONIQ_LEASE_TTL=30)
# A body that notes its start and its end (also when it is stopped).
BODY = (
    "echo start $$ $(date +%s.%N) >> {log}; "
    "trap 'echo end $$ $(date +%s.%N) >> {log}; exit 143' TERM; "
    "sleep {seconds} & wait; echo end $$ $(date +%s.%N) >> {log}"
)


@pytest.fixture
def world(tmp_path):
    db = migrated_database(tmp_path)
    processes = []

    def start(process):
        processes.append(process)
        return process

    try:
        yield db, start
    finally:
        for process in reversed(processes):
            process.stop()
            print(f"--- {process.log_path}\n{process.output()}")
        drop_database(db)


def apply(db, tmp_path, text):
    path = tmp_path / "croniq.yaml"
    path.write_text(text)
    manage(db, "apply", str(path))


def intervals(log):
    """[(start, end)] of each body from its notes (an unfinished one ends now)."""
    starts, ends = {}, {}
    for line in log.read_text().splitlines():
        kind, pid, at = line.split()
        (starts if kind == "start" else ends)[pid] = float(at)
    return [(at, ends.get(pid, time.time())) for pid, at in starts.items()]


def most_at_once(spans):
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def test_replace_stops_the_running_body_before_the_next_one_starts(world, tmp_path):
    db, start = world
    log = tmp_path / "bodies"
    body = BODY.format(log=log, seconds=60)
    apply(db, tmp_path, f"""
jobs:
  - name: replaced
    schedule: "@every 3s"
    overlap: replace
    labels: [replace]
    command: "{body}"
""")  # fmt: skip
    server = start(Server(db, tmp_path / "web.log", **SETTINGS))
    token = issue_token(db)
    start(start_loop(db, tmp_path / "loop.log", **SETTINGS))
    ready(server)
    for name in ("a", "b"):  # room for two: only the policy keeps them apart
        args = ("--name", name, "--labels", "replace", "--capacity", "2", "--poll-wait", "5")
        start(start_agent(server.url, token, tmp_path / f"{name}.log", *args))

    wait_for(lambda: log.exists() and len(intervals(log)) >= 3, timeout=40,
             message="three bodies of the job")  # fmt: skip
    spans = sorted(intervals(log))
    for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False):
        assert next_start >= end, "a body started before the one it replaced had ended"
    stopped = query(
        db,
        "SELECT COUNT(*) FROM scheduler_execution WHERE state = 'cancelled'"
        " AND cancel_requested_at IS NOT NULL",
    )[0][0]
    assert stopped >= 2
    replaced = query(
        db, "SELECT COUNT(*) FROM audit_auditevent WHERE action = 'execution.replaced'"
    )[0][0]
    assert replaced >= 2


def test_a_group_of_five_jobs_never_runs_more_than_its_budget(world, tmp_path):
    db, start = world
    log = tmp_path / "bodies"
    body = BODY.format(log=log, seconds=1.5)
    jobs = "".join(
        f"""
  - name: vendor-{i}
    schedule: "@every 1s"
    overlap: queue
    max_queue: 2
    concurrency_group: vendor-api
    labels: [vendor]
    command: "{body}"
"""
        for i in range(5)
    )
    apply(
        db,
        tmp_path,
        f"concurrency_groups:\n  - name: vendor-api\n    max_concurrent: 2\njobs:{jobs}",
    )
    webs = 2 if on_postgres() else 1
    servers = [start(Server(db, tmp_path / f"web-{i}.log", **SETTINGS)) for i in range(webs)]
    token = issue_token(db)
    start(start_loop(db, tmp_path / "loop.log", **SETTINGS))
    for server in servers:
        ready(server)
    for i in range(4):
        server = servers[i % webs]
        args = ("--name", f"agent-{i}", "--labels", "vendor", "--capacity", "2", "--poll-wait", "5")
        start(start_agent(server.url, token, tmp_path / f"agent-{i}.log", *args))

    wait_for(lambda: log.exists() and len(intervals(log)) >= 12, timeout=60,
             message="a dozen bodies of the group")  # fmt: skip
    spans = intervals(log)
    assert most_at_once(spans) <= 2
    # The budget was used, not undercut: two bodies ran at once at some point.
    assert most_at_once(spans) == 2
    jobs_run = query(
        db,
        "SELECT COUNT(DISTINCT job_id) FROM scheduler_execution WHERE state = 'succeeded'",
    )[0][0]
    assert jobs_run >= 3  # FIFO across the group's jobs, not one job hogging it
