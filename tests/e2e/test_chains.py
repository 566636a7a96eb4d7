"""A chain with real processes: the server, the scheduler loop and an agent
running real jobs. `import` succeeding starts `report` once per run, with the
upstream's id in its environment; `import-broken` failing starts nothing
on success and its `on_failure` job instead."""

import pytest

from harness.processes import (
    Server,
    drop_database,
    manage,
    migrated_database,
    query,
    start_agent,
    start_loop,
    wait_for,
)
from tests.agent.world import issue_token, ready

pytestmark = pytest.mark.e2e

SETTINGS = dict(CRONIQ_HEARTBEAT_INTERVAL=1)
YEARLY = "0 0 1 1 *"  # chained jobs fire by their chain, not their schedule


def runs(db, job):
    return query(
        db,
        "SELECT e.id, e.state, e.trigger, e.upstream_id, e.scheduled_for"
        " FROM scheduler_execution e JOIN scheduler_job j ON j.id = e.job_id"
        " WHERE j.name = %s ORDER BY e.id",
        (job,),
    )


def test_report_runs_once_after_each_successful_import_and_never_after_a_failed_one(tmp_path):
    db = migrated_database(tmp_path)
    seen = tmp_path / "upstreams"
    processes = []
    try:
        (tmp_path / "jobs.yaml").write_text(f"""
jobs:
  - name: import
    schedule: "@every 3s"
    command: "true"
    labels: [chain]
    on_success: [report]
  - name: report
    schedule: "{YEARLY}"
    command: "echo $CRONIQ_UPSTREAM_EXECUTION_ID >> {seen}"
    labels: [chain]
  - name: import-broken
    schedule: "@every 3s"
    command: "exit 3"
    labels: [chain]
    on_success: [report-broken]
    on_failure: [page-oncall]
  - name: report-broken
    schedule: "{YEARLY}"
    command: "true"
    labels: [chain]
  - name: page-oncall
    schedule: "{YEARLY}"
    command: "true"
    labels: [chain]
""")  # fmt: skip
        manage(db, "apply", str(tmp_path / "jobs.yaml"))
        server = Server(db, tmp_path / "web.log", **SETTINGS)
        processes.append(server)
        token = issue_token(db)
        processes.append(start_loop(db, tmp_path / "loop.log", **SETTINGS))
        ready(server)
        args = ("--name", "chain-agent", "--labels", "chain", "--capacity", "4", "--poll-wait", "5")
        processes.append(start_agent(server.url, token, tmp_path / "agent.log", *args))

        def settled(job, state, count):
            return sum(1 for run in runs(db, job) if run[1] == state) >= count

        wait_for(lambda: settled("report", "succeeded", 2), timeout=40, message="two reports")
        wait_for(lambda: settled("page-oncall", "succeeded", 2), timeout=40, message="two pages")
        imports = {run[0]: run for run in runs(db, "import") if run[1] == "succeeded"}
        reports = [run for run in runs(db, "report") if run[1] == "succeeded"]
        for _, _, trigger, upstream, scheduled_for in reports:
            assert trigger == "chain" and upstream in imports
            assert str(scheduled_for) == str(imports[upstream][4])  # the upstream's logical time
        assert len({run[3] for run in reports}) == len(reports)  # once per import run
        # Read after the succeeded reports and before every report: a report
        # that starts meanwhile has not written yet, or is in the second read.
        written = {int(u) for u in seen.read_text().split()}
        assert {run[3] for run in reports} <= written <= {run[3] for run in runs(db, "report")}
        assert runs(db, "report-broken") == []
        failed = {run[0] for run in runs(db, "import-broken") if run[1] == "failed"}
        assert {run[3] for run in runs(db, "page-oncall")} <= failed
    finally:
        for process in reversed(processes):
            process.stop()
            print(f"--- {process.log_path}\n{process.output()}")
        drop_database(db)
