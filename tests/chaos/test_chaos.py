"""Croniq under random faults, as real processes: see tests/chaos/checks.py for
what is checked and why, tests/chaos/harness.py for the cluster and faults.

    .venv/bin/python -m pytest tests/chaos -m chaos                 # short, SQLite
    CRONIQ_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_chaos \\
        .venv/bin/python -m pytest tests/chaos -m chaos             # short, PostgreSQL
    make chaos                                                      # long profile

CRONIQ_CHAOS_PROFILE=short|long picks the length, CRONIQ_CHAOS_SEED replays a run,
CRONIQ_CHAOS_DIR=/some/dir keeps the logs, the ledger and chaos-report.txt.
CRONIQ_CHAOS_PGBOUNCER=1 puts PgBouncer in transaction mode between the
PostgreSQL run and its server (docs/design.md §16): every connection goes
through it, but the LISTEN ones (CRONIQ_LISTEN_DATABASE_URL).
CRONIQ_CHAOS_REPLICA=1 runs the PostgreSQL run on a primary and its synchronous
standby (harness/replica.py), the processes on their multi-host URL, and adds
the failover fault (tests/chaos/harness.py).
"""

import os
import random
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.pgbouncer import PgBouncer, pgbouncer_bin
from harness.private_postgres import PrivatePostgres, postgres_bin
from harness.processes import on_postgres
from harness.replica import ReplicaPair
from tests.chaos import checks
from tests.chaos.harness import LEASE_TTL, Cluster, Faults, profile, seed, wait_healthy

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

SHOWN = 25  # violations listed in a failure message


def skip_reason(backend):
    if backend == "postgresql":
        if not on_postgres():
            return "runs in the PostgreSQL pass of the suite"
        if postgres_bin() is None:
            return "PostgreSQL server binaries not installed"
        if through_pgbouncer() and pgbouncer_bin() is None:
            return "CRONIQ_CHAOS_PGBOUNCER=1, but pgbouncer is not installed"
    elif on_postgres():
        return "runs in the SQLite pass of the suite"
    return None


def through_pgbouncer():
    return os.environ.get("CRONIQ_CHAOS_PGBOUNCER", "") in ("1", "true", "yes", "on")


class PooledPostgres:
    """The private server as Croniq sees it behind PgBouncer in transaction
    mode: `url` is the pooler's; starts, stops and the rest are the
    server's (restarting it leaves the pooler up, as in production)."""

    def __init__(self, server):
        self.server = server
        # Every connection of two web processes, two loops and the harness
        # at once: none waits in the pooler's queue for a server connection.
        self.bouncer = PgBouncer(server.url, pool_size=60).start()
        self.url = self.bouncer.url_for(server.url)

    def __getattr__(self, name):
        return getattr(self.server, name)

    def direct(self, url):
        """`url` (a database through the pooler) straight to the server."""
        return url.replace(f":{self.bouncer.port}/", f":{self.server.port}/")

    def wait_ready(self):
        self.server.wait_ready()
        self.bouncer.wait_ready()

    def destroy(self):
        self.bouncer.stop()
        self.server.destroy()


def on_a_pair():
    return os.environ.get("CRONIQ_CHAOS_REPLICA", "") in ("1", "true", "yes", "on")


def chaos_run(backend, workdir, say):
    run_seed = seed()
    chosen = profile()
    pooled = backend == "postgresql" and through_pgbouncer()
    say(
        f"chaos {backend}{' through PgBouncer' if pooled else ''}: profile {chosen.name}, "
        f"seed {run_seed} (replay with CRONIQ_CHAOS_SEED={run_seed}); logs in {workdir}"
    )
    postgres = None
    if backend == "postgresql":
        postgres = ReplicaPair() if on_a_pair() else PrivatePostgres()
        postgres.start()
        postgres.wait_ready()
        if pooled:
            postgres = PooledPostgres(postgres)
            postgres.wait_ready()
    cluster = Cluster(backend, workdir, postgres)
    faults = Faults(cluster, random.Random(run_seed), say)
    if pooled:
        # The processes the cluster starts inherit it (harness.processes.process_env).
        os.environ["CRONIQ_LISTEN_DATABASE_URL"] = postgres.direct(cluster.db)
    try:
        cluster.start()
        cluster.apply_jobs()
        time.sleep(3)  # a few clean instants first
        faults.run(chosen.fault_seconds, chosen.mean_gap)
        if postgres is not None:
            postgres.wait_ready()
        for web in cluster.webs:
            wait_healthy(web)
        time.sleep(2 * LEASE_TTL + 2)  # the last repairs happen with everything up
        disabled_at = datetime.now(UTC)
        cluster.disable_jobs()
        if not cluster.settle():
            say("executions still unsettled after the jobs were disabled (no change for 60 s)")
        cluster.stop()
        facts = checks.read_facts(cluster, cluster.metrics(), disabled_at)
        cluster.stop_webs()
    finally:
        cluster.kill_everything()
        if pooled:
            os.environ.pop("CRONIQ_LISTEN_DATABASE_URL", None)
        if postgres is not None:
            postgres.destroy()
    instants, fenced, outcomes = checks.check_instants(facts)
    results = {
        "instants": instants,
        "fenced runs settled as failed": fenced,
        "runs": checks.check_runs(facts),
        "singleton overlap": checks.check_singleton_overlap(facts),
        "queue limit": checks.check_queue_limit(facts),
        "stuck": checks.check_nothing_stuck(facts),
        "audit": checks.check_repairs_audited(facts),
        "metrics": checks.check_metrics(facts),
        "operator saves": checks.check_operator_saves(facts),
    }
    table = checks.summary(backend, run_seed, faults, facts, results, outcomes)
    say(table)
    report = [table, "", "faults:", *faults.timeline, ""]
    for name, found in results.items():
        report += [f"{name}: {len(found)} violation(s)", *[f"  {v}" for v in found]]
    (workdir / "chaos-report.txt").write_text("\n".join(report) + "\n")
    return {"results": results, "table": table, "dir": workdir}


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def chaos(request, tmp_path_factory):
    reason = skip_reason(request.param)
    if reason:
        pytest.skip(reason)
    reporter = request.config.pluginmanager.getplugin("terminalreporter")

    def say(text):
        if reporter is not None:
            reporter.write_line(text)
        else:
            print(text)

    keep = os.environ.get("CRONIQ_CHAOS_DIR")  # logs, ledger and report outlive pytest's tmp
    if keep:
        workdir = Path(keep) / f"{request.param}-{time.strftime('%Y%m%dT%H%M%S')}"
        workdir.mkdir(parents=True)
    else:
        workdir = tmp_path_factory.mktemp(f"chaos-{request.param}")
    return chaos_run(request.param, workdir, say)


def assert_none(chaos, name):
    found = chaos["results"][name]
    shown = "\n".join(found[:SHOWN])
    more = f"\n... and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    assert not found, (
        f"{len(found)} {name} violation(s):\n{shown}{more}\n\n{chaos['table']}\n"
        f"full report: {chaos['dir'] / 'chaos-report.txt'}"
    )


def test_every_scheduled_instant_has_one_success_or_an_audited_policy_outcome(chaos):
    assert_none(chaos, "instants")


def test_a_run_its_runner_killed_for_fencing_is_retried_not_settled_as_failed(chaos):
    assert_none(chaos, "fenced runs settled as failed")


def test_the_ledger_of_what_ran_matches_the_database(chaos):
    assert_none(chaos, "runs")


def test_runs_of_a_singleton_job_never_overlap(chaos):
    assert_none(chaos, "singleton overlap")


def test_nothing_is_left_pending_or_running_once_the_cluster_settles(chaos):
    assert_none(chaos, "stuck")


def test_every_reap_retry_and_takeover_is_in_the_audit(chaos):
    assert_none(chaos, "audit")


def test_metrics_on_every_web_process_match_the_audit_and_the_database(chaos):
    assert_none(chaos, "metrics")


def test_an_operator_saving_jobs_in_the_admin_writes_only_what_they_changed(chaos):
    assert_none(chaos, "operator saves")
