"""Croniq through a PostgreSQL failover, as real processes.

A web server, a scheduler loop and an agent run on the multi-host URL of a
primary and its synchronous standby (harness/replica.py) while jobs run;
the primary is killed (SIGKILL, with a job running across it) and the
standby promoted. `run` returns what happened:
tests/e2e/test_failover.py checks it, bench/failover.py prints its figures.

Every job appends to a ledger when a run starts and when it ends; the agent
logs each finish the server answered. What must hold:

- scheduling resumes: the loop fires and the agent is handed work on the
  new primary (seconds from the kill: `first_fire`, `first_dispatch`);
- nothing runs twice: no execution starts twice, no instant of a job runs
  twice (`started_twice`, `doubled`);
- nothing is lost: every instant of the schedule from the first to the
  last has its success (or, for the singleton job, an overlap skip); every
  finish the server answered before the kill is there after it, as
  answered (`missing`), and every run that ended is settled succeeded
  (`unsettled`: the agent retried its finish until answered).
"""

import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from harness.processes import Server, manage, query, start_agent, start_loop, wait_for
from harness.replica import ReplicaPair

INTERVAL = 1  # every job is `@every 1s`
# (name, singleton, seconds of work). `long` runs across the kill: its
# heartbeats and its finish cross the failover.
JOBS = [("quick", False, 0.2), ("solo", True, 0.3), ("long", False, 3.0)]
LABEL = "failover"
# A lease outlives the failover (the agent fences a job it cannot renew for
# TTL - TTL/3 = 10 s), yet a claim whose answer was lost with the primary
# is reaped and retried within the test.
SETTINGS = dict(CRONIQ_LEASE_TTL=15, CRONIQ_HEARTBEAT_INTERVAL=3)
LEDGER_COMMAND = (
    'echo "start $CRONIQ_EXECUTION_ID $CRONIQ_JOB $CRONIQ_SCHEDULED_FOR $CRONIQ_ATTEMPT"'
    " >> {ledger}; "
    'sleep {seconds}; echo "end $CRONIQ_EXECUTION_ID" >> {ledger}'
)
REPORTED = re.compile(r"execution (\d+) reported: (\w+)")
TIMEOUT = 90.0  # any one wait, on a loaded machine


@dataclass
class Failover:
    killed_at: float  # time.time() of the SIGKILL
    promoted_after: float  # seconds from the kill until the standby took writes
    first_fire: float  # seconds from the kill to the first execution fired on the new primary
    first_dispatch: float  # ... to the first execution claimed on the new primary
    acknowledged: dict[int, str]  # finishes the server answered before the kill
    instants: int = 0  # scheduled instants checked
    missing: list[str] = field(default_factory=list)
    unsettled: list[str] = field(default_factory=list)
    started_twice: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def violations(self) -> list[str]:
        return self.missing + self.unsettled + self.started_twice + self.doubled + self.lost


def jobs_file(path: Path, ledger: Path) -> Path:
    """The jobs, disabled: `enable` gives them one known first instant."""
    jobs = [
        {
            "name": name,
            "schedule": f"@every {INTERVAL}s",
            "command": LEDGER_COMMAND.format(ledger=ledger, seconds=seconds),
            "labels": [LABEL],
            "singleton": singleton,
            "enabled": False,
        }
        for name, singleton, seconds in JOBS
    ]
    path.write_text(yaml.safe_dump({"jobs": jobs}))
    return path


def run(
    workdir: Path, schema_from: str | None = None, outage: float = 0.0, unreachable: bool = False
) -> Failover:
    """The scenario, on a new pair; `schema_from` is a migrated database to
    copy (else `migrate` runs on the pair). The standby is promoted
    `outage` seconds after the kill (an HA manager's detection time:
    Patroni's is 10 to 30 s), or with 0 once the loop has seen the primary
    gone. `unreachable`: the primary's machine is lost (its packets
    dropped), not only its server (harness/replica.py)."""
    pair = ReplicaPair()
    processes = []
    try:
        pair.start()
        url = pair.create_database("croniq", schema_from)
        if schema_from is None:
            manage(url, "migrate", "--no-input")
        token = manage(url, "create_runner_token", "failover").stdout.strip().splitlines()[-1]
        ledger = workdir / "ledger"
        manage(url, "apply", str(jobs_file(workdir / "jobs.yaml", ledger)))
        web = Server(url, workdir / "web.log", **SETTINGS)
        processes.append(web)
        web.wait_ready(timeout=TIMEOUT)
        agent = start_agent(
            web.url, token, workdir / "agent.log",
            "--name", "failover", "--labels", LABEL, "--capacity", "8", "--poll-wait", "10",
        )  # fmt: skip
        processes.append(agent)
        loop = start_loop(url, workdir / "loop.log", **SETTINGS)
        processes.append(loop)
        wait_for(lambda: "scheduler loop started" in loop.output(), TIMEOUT, message="the loop")
        first = enable(url)

        # A few finishes answered, and `long` running: then the primary dies.
        wait_for(
            lambda: len(reported(agent.output())) >= 3 and running(ledger, "long"),
            TIMEOUT,
            message="finishes answered and a long run going",
        )
        acknowledged = reported(agent.output())
        killed_at = pair.kill_primary(unreachable)
        if outage:
            time.sleep(max(0.0, killed_at + outage - time.time()))  # the outage itself
        else:  # the processes find the primary gone before a new one is there
            wait_for(lambda: "database unavailable" in loop.output(), TIMEOUT, message="outage")
        pair.promote()
        promoted_after = time.time() - killed_at
        url = pair.primary_url("croniq")  # the harness's reads: the new primary alone

        def after_kill(column: str) -> float | None:
            row = query(url, f"SELECT MIN({column}) FROM scheduler_execution WHERE {column} > %s",
                        (datetime.fromtimestamp(killed_at, UTC),))  # fmt: skip
            return row[0][0].timestamp() - killed_at if row[0][0] else None

        first_fire = wait_for(lambda: after_kill("created_at"), TIMEOUT, message="a fire")
        first_dispatch = wait_for(lambda: after_kill("claimed_at"), TIMEOUT, message="a dispatch")
        # Every job runs again on the new primary, then the schedule stops.
        wait_for(
            lambda: succeeded_since(url, killed_at) >= {name for name, _, _ in JOBS},
            TIMEOUT,
            message="every job succeeding after the failover",
        )
        disable(url)
        wait_for(lambda: not unsettled_runs(url), TIMEOUT, message="every run settled")
        outcome = Failover(killed_at, promoted_after, first_fire, first_dispatch, acknowledged)
        check(outcome, url, ledger, first)
    finally:
        for process in reversed(processes):
            process.stop()
        pair.destroy()
    outcome.logs = [process.log_path for process in processes]
    return outcome


def enable(url: str) -> datetime:
    """Enable every job with the same first instant, telling the loop as
    `Job.save` does (a NOTIFY on the jobs' channel); returns that instant."""
    first = (datetime.now(UTC) + timedelta(seconds=2)).replace(microsecond=0)
    write(url, "UPDATE scheduler_job SET enabled = %s, next_run_at = %s, updated_at = %s",
          (True, first, datetime.now(UTC)))  # fmt: skip
    return first


def disable(url: str) -> None:
    write(url, "UPDATE scheduler_job SET enabled = %s, updated_at = %s", (False, datetime.now(UTC)))


def write(url: str, sql: str, params: tuple) -> None:
    import psycopg

    from scheduler.firing.job_edits import CHANNEL

    with psycopg.connect(url.replace("postgres://", "postgresql://")) as conn:
        conn.execute(sql, params)
        conn.execute(f"NOTIFY {CHANNEL}")


def reported(agent_log: str) -> dict[int, str]:
    """{execution id: final state} of the finishes the server answered."""
    return {int(pk): state for pk, state in REPORTED.findall(agent_log)}


def ledger_lines(ledger: Path) -> list[list[str]]:
    return [line.split() for line in ledger.read_text().splitlines()] if ledger.exists() else []


def running(ledger: Path, job: str) -> bool:
    lines = ledger_lines(ledger)
    ended = {parts[1] for parts in lines if parts[0] == "end"}
    return any(parts[0] == "start" and parts[2] == job and parts[1] not in ended for parts in lines)


def succeeded_since(url: str, since: float) -> set[str]:
    rows = query(
        url,
        "SELECT DISTINCT j.name FROM scheduler_execution e JOIN scheduler_job j ON j.id = e.job_id"
        " WHERE e.state = 'succeeded' AND e.claimed_at > %s",
        (datetime.fromtimestamp(since, UTC),),
    )
    return {name for (name,) in rows}


def unsettled_runs(url: str) -> list[tuple]:
    return query(
        url,
        "SELECT id, state FROM scheduler_execution WHERE state IN ('queued', 'pending', 'running')",
    )


def check(outcome: Failover, url: str, ledger: Path, first: datetime) -> None:
    """Fill the outcome's lists from the ledger and the new primary."""
    rows = query(
        url,
        "SELECT e.id, j.name, e.scheduled_for, e.attempt, e.state FROM scheduler_execution e"
        " JOIN scheduler_job j ON j.id = e.job_id",
    )
    states = {pk: state for pk, _, _, _, state in rows}
    by_instant = defaultdict(list)
    for pk, job, scheduled_for, attempt, state in rows:
        by_instant[job, scheduled_for].append((attempt, state, pk))
    for pk, state in sorted(outcome.acknowledged.items()):
        if states.get(pk) != state:
            outcome.missing.append(f"execution {pk} answered {state}, now {states.get(pk)}")
    lines = ledger_lines(ledger)
    starts = Counter(parts[1] for parts in lines if parts[0] == "start")
    outcome.started_twice = [
        f"execution {pk} started {n} times" for pk, n in starts.items() if n > 1
    ]
    runs = Counter((parts[2], parts[3]) for parts in lines if parts[0] == "start")
    outcome.doubled = [f"{job} at {at} ran {n} times" for (job, at), n in runs.items() if n > 1]
    for parts in lines:
        if parts[0] == "end" and states.get(int(parts[1])) != "succeeded":
            outcome.unsettled.append(f"execution {parts[1]} ended, {states.get(int(parts[1]))}")
    last = dict(query(url, "SELECT name, last_scheduled_at FROM scheduler_job"))
    for job, singleton, _ in JOBS:
        instant = first
        while instant <= last[job]:
            outcome.instants += 1
            found = {state for _, state, _ in by_instant.get((job, instant), [])}
            allowed = {"succeeded", "skipped"} if singleton else {"succeeded"}
            if not found & allowed:
                outcome.lost.append(f"{job} at {instant.isoformat()}: {sorted(found) or 'none'}")
            instant += timedelta(seconds=INTERVAL)
