"""What a chaos run must show, read from the ledger, the database and /metrics.

The checks, and why each is strict enough to catch a real bug:

1. Instants. Every job is `@every 2s`, so its scheduled instants are exactly
   first + k * 2s, from the instant `apply` set (first) to the job's final
   `last_scheduled_at`. Each instant must end in exactly one of:
   - one `succeeded` execution (two is a duplicate run: invariant 1/2);
   - one `skipped` attempt 1 of a singleton job, with its `execution.skipped`
     audit event naming an execution of the same job that was live then;
   - no execution, inside the missed range of a `job.misfire` audit event
     whose `dropped` count matches the instants it left without one;
   - a lost last attempt with its `execution.given_up` audit (its runners
     kept vanishing, CRONIQ_LOST_RETRIES used up).
   Anything else (no execution at all, a failure: the workload never fails
   on its own, a lost attempt without a retry) is a lost instant. Attempts of
   one instant must be 1..n with a retry only after lost/failed, and nothing
   after the success. No execution may sit off the 2 s grid, and the
   scheduler must have kept firing until the jobs were disabled.
2. Runs. The ledger is the truth about what ran: a `succeeded` execution has
   a completed run in it (start and end) with the right job and attempt; no
   execution id starts twice (a double dispatch); nothing skipped, pending
   or never claimed ran.
3. Singleton jobs never overlap: a run lasts from its start to its end, its
   SIGTERM (the trap writes `killed`), or the SIGKILL of its machine. A run
   that never ended at all is a violation too.
4. Nothing is left pending or running once the jobs are disabled and the
   cluster had a few lease TTLs to settle.
5. Every repair is audited: each lost execution has one `execution.reaped`
   event with its reason, each retry one `execution.retry` naming the lost
   attempt, each takeover's released executions are exactly the ones lost
   as `runner_superseded`, and takeovers per runner lie between the agent
   restarts that reached the server and all restarts.
6. /metrics agrees with the database on every web process: executions by
   final state, reaps by reason, takeovers per runner, singleton skips per
   job, fencing rejections, retries, misfires, give-ups, flaps.
"""

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from harness.processes import query
from tests.chaos.admin_operator import OPERATOR
from tests.chaos.harness import INTERVAL, as_utc

FINAL = ("succeeded", "failed", "timed_out", "lost", "cancelled", "skipped")
# The scheduler loop's clock and the row it reads can be this far apart
# under load (the skip check compares a tick's `now` with row times).
SKIP_SLACK = timedelta(seconds=2)


@dataclass
class Run:
    execution: int
    job: str
    attempt: int
    agent: str
    start: float
    end: float = None
    killed: float = None
    starts: int = 1


@dataclass
class Facts:
    jobs: dict
    executions: dict
    audit: list
    metrics: list
    runs: dict
    deaths: dict
    first_instants: dict
    disabled_at: datetime
    registered: dict  # runner name -> agent instances that reached the server
    started: dict  # runner name -> agent instances started
    malformed_ledger_lines: int = 0
    by_instant: dict = field(default_factory=dict)

    def events(self, action):
        return [e for e in self.audit if e["action"] == action]


# -- reading -----------------------------------------------------------------


def loads(value):
    return json.loads(value) if isinstance(value, str) else (value or {})


def read_facts(cluster, metrics_texts, disabled_at):
    db = cluster.db
    jobs = {}
    for pk, name, singleton, overlap, limit, last, upcoming, retries in query(
        db,
        "SELECT id, name, singleton, overlap, max_concurrent, last_scheduled_at, next_run_at,"
        " retries FROM scheduler_job",
    ):
        jobs[pk] = dict(
            id=pk,
            name=name,
            singleton=bool(singleton),
            overlap=overlap,
            max_concurrent=limit,
            last=as_utc(last),
            next=as_utc(upcoming),
            retries=retries,
        )
    executions = {}
    for row in query(
        db,
        "SELECT e.id, e.job_id, e.scheduled_for, e.attempt, e.trigger, e.state, e.lost_reason, "
        "e.created_at, e.claimed_at, e.finished_at, e.run_after, e.lease, e.exit_code, e.error, "
        "r.name FROM scheduler_execution e LEFT JOIN runners_runner r ON r.id = e.runner_id",
    ):
        (pk, job_id, scheduled_for, attempt, trigger, state, lost_reason, created, claimed,
         finished, run_after, lease, exit_code, error, runner) = row  # fmt: skip
        executions[pk] = dict(
            id=pk,
            job=jobs[job_id]["name"],
            job_id=job_id,
            scheduled_for=as_utc(scheduled_for),
            attempt=attempt,
            trigger=trigger,
            state=state,
            lost_reason=lost_reason,
            created_at=as_utc(created),
            claimed_at=as_utc(claimed),
            finished_at=as_utc(finished),
            run_after=as_utc(run_after),
            lease=lease,
            exit_code=exit_code,
            error=error,
            runner=runner,
        )
    audit = [
        dict(action=a, target_type=tt, target_id=ti, actor=actor, data=loads(d), at=as_utc(at))
        for a, tt, ti, actor, d, at in query(
            db,
            "SELECT action, target_type, target_id, actor_name, data, at FROM audit_auditevent "
            "ORDER BY id",
        )
    ]
    runs, malformed = read_ledger(cluster.ledger)
    deaths = {}
    registered, started = {}, {}
    for agent in cluster.agents:
        deaths.update(agent.deaths)
        started[agent.name] = list(agent.started)
        registered[agent.name] = [
            label
            for label in agent.started
            if "connected to" in (cluster.dir / f"{label.replace('#', '-')}.log").read_text()
        ]
    facts = Facts(
        jobs=jobs,
        executions=executions,
        audit=audit,
        metrics=[parse_metrics(text) for text in metrics_texts],
        runs=runs,
        deaths=deaths,
        first_instants=cluster.first_instants,
        disabled_at=disabled_at,
        registered=registered,
        started=started,
        malformed_ledger_lines=malformed,
    )
    return index(facts)


def index(facts):
    """Group the executions by (job, instant), attempts in order."""
    facts.by_instant = {}
    for execution in facts.executions.values():
        key = (execution["job"], execution["scheduled_for"])
        facts.by_instant.setdefault(key, []).append(execution)
    for attempts in facts.by_instant.values():
        attempts.sort(key=lambda e: e["attempt"])
    return facts


def read_ledger(path):
    """({execution id: Run}, malformed line count)."""
    runs, malformed = {}, 0
    if not path.exists():
        return runs, 0
    for line in path.read_text().splitlines():
        parts = line.split()
        try:
            if parts[0] == "start" and len(parts) == 6:
                _, pk, job, attempt, agent, at = parts
                pk = int(pk)
                if pk in runs:
                    runs[pk].starts += 1
                else:
                    runs[pk] = Run(pk, job, int(attempt), agent, float(at))
            elif parts[0] == "end" and len(parts) == 2 and int(parts[1]) in runs:
                # The job's process group was signalled while `date` printed
                # the end: the trap's "killed" line follows. Not an end.
                continue
            elif parts[0] in ("end", "killed") and len(parts) == 3:
                run = runs.get(int(parts[1]))
                if run is None:
                    malformed += 1
                    continue
                setattr(run, parts[0], float(parts[2]))
            else:
                malformed += 1
        except (ValueError, IndexError):
            malformed += 1
    return runs, malformed


SAMPLE = re.compile(r"^(croniq_[a-zA-Z0-9_]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """{(sample name, frozenset of labels): value} for croniq_* samples."""
    samples = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match:
            name, labels, value = match.groups()
            key = frozenset(LABEL.findall(labels or ""))
            samples[(name, key)] = float(value)
    return samples


def metric_by(samples, name, label):
    """{label value: value} of one counter family (missing label -> "")."""
    found = {}
    for (sample, labels), value in samples.items():
        if sample == name:
            found[dict(labels).get(label, "")] = value
    return found


def metric_total(samples, name):
    """The sum of every sample of one family, whatever its labels."""
    return sum(value for (sample, _), value in samples.items() if sample == name)


# -- the checks ----------------------------------------------------------------


def instants_of(facts, job):
    first = facts.first_instants[job["name"]]
    last = job["last"]
    instants = []
    instant = first
    while last is not None and instant <= last:
        instants.append(instant)
        instant += timedelta(seconds=INTERVAL)
    return instants


def misfire_ranges(facts, job):
    """[(set of missed instants, dropped count, event)] of one job."""
    ranges = []
    for event in facts.events("job.misfire"):
        if event["target_id"] != str(job["id"]):
            continue
        data = event["data"]
        first = as_utc(datetime.fromisoformat(data["first_missed"]))
        missed = {first + k * timedelta(seconds=INTERVAL) for k in range(data["missed"])}
        ranges.append((missed, data["dropped"], event))
    return ranges


# What croniq-runner reports for a job it killed because it could not renew
# the lease (croniq_runner/job.py REASONS["fenced"]).
FENCED_ERROR = "killed by the runner: its lease could not be renewed"
FENCED_OUTCOME = "fenced by its runner, settled as failed, never retried"


def check_instants(facts):
    """Check 1: returns (violations, fenced failures, outcome counts).

    Instants whose run was killed by its own runner's self-fencing and then
    settled as `failed` (so never retried) are returned apart, under their
    own test: the chaos suite found that bug (the runner renewed the lease
    of the job it had fenced, then reported the kill as a failure).
    """
    violations, fenced, outcomes = [], [], Counter()
    skip_events = {e["target_id"]: e for e in facts.events("execution.skipped")}
    given_up = {e["target_id"] for e in facts.events("execution.given_up")}
    for job in facts.jobs.values():
        instants = instants_of(facts, job)
        expected = set(instants)
        ranges = misfire_ranges(facts, job)
        dropped_seen = Counter()
        for execution in facts.executions.values():
            if execution["job_id"] == job["id"] and execution["scheduled_for"] not in expected:
                violations.append(f"off the 2 s grid or outside the run: {describe(execution)}")
        for instant in instants:
            attempts = facts.by_instant.get((job["name"], instant), [])
            outcome, problem = instant_outcome(job, instant, attempts, facts, skip_events, given_up)
            if outcome == "no execution":
                covering = [i for i, (missed, _, _) in enumerate(ranges) if instant in missed]
                if covering:
                    outcome, problem = "dropped by misfire policy", None
                    dropped_seen[covering[0]] += 1
                else:
                    problem = f"{job['name']} @ {instant:%H:%M:%S.%f}: no execution, no misfire"
            outcomes[outcome] += 1
            if problem:
                (fenced if outcome == FENCED_OUTCOME else violations).append(problem)
        for i, (_, dropped, event) in enumerate(ranges):
            if dropped_seen[i] != dropped:
                violations.append(
                    f"{job['name']}: misfire event says {dropped} dropped, "
                    f"{dropped_seen[i]} instants of its range have no execution ({event['data']})"
                )
        # The scheduler kept firing until the jobs were disabled.
        if job["last"] is None or job["last"] < facts.disabled_at - timedelta(
            seconds=2 * INTERVAL + 2
        ):
            violations.append(
                f"{job['name']}: last fired for {job['last']}, jobs disabled at "
                f"{facts.disabled_at:%H:%M:%S}: the scheduler stopped firing"
            )
    return violations, fenced, outcomes


def instant_outcome(job, instant, attempts, facts, skip_events, given_up):
    """(outcome, violation or None) for one scheduled instant."""
    where = f"{job['name']} @ {instant:%H:%M:%S.%f}"
    if not attempts:
        return "no execution", None
    numbers = [e["attempt"] for e in attempts]
    if numbers != list(range(1, len(attempts) + 1)):
        return "broken retry chain", f"{where}: attempts {numbers} are not 1..n"
    succeeded = [e for e in attempts if e["state"] == "succeeded"]
    if len(succeeded) > 1:
        ids = [e["id"] for e in succeeded]
        return "duplicate", f"{where}: {len(succeeded)} succeeded executions {ids}"
    for before, after in zip(attempts, attempts[1:], strict=False):
        if before["state"] not in ("lost", "failed", "timed_out") or after["trigger"] != "retry":
            return "bad retry", f"{where}: attempt {after['attempt']} after {describe(before)}"
    if succeeded:
        return "succeeded", None
    last = attempts[-1]
    if last["state"] == "skipped":
        return skip_outcome(where, last, attempts, facts, skip_events)
    if last["state"] == "lost" and str(last["id"]) in given_up:
        return "given up after repeated loss (audited)", None
    if last["state"] == "failed" and last["error"].startswith(FENCED_ERROR):
        run = facts.runs.get(last["id"])
        return FENCED_OUTCOME, f"{where}: {describe(last)}; ledger: {run}"
    return last["state"], f"{where}: ends {describe(last)} with no retry and no audited reason"


def skip_outcome(where, skipped, attempts, facts, skip_events):
    if len(attempts) != 1 or not facts.jobs[skipped["job_id"]]["singleton"]:
        return "bad skip", f"{where}: skip of a non-singleton job or with retries"
    event = skip_events.get(str(skipped["id"]))
    if event is None:
        return "unaudited skip", f"{where}: skipped execution {skipped['id']} has no audit event"
    holder = skip_holder(facts, skipped, str(event["data"].get("live", "")))
    holder_id = holder["id"] if holder else event["data"].get("live")
    at = skipped["finished_at"]
    live = (
        holder is not None
        and holder["job_id"] == skipped["job_id"]
        and holder["created_at"] <= at + SKIP_SLACK
        and (holder["finished_at"] is None or holder["finished_at"] >= at - SKIP_SLACK)
    )
    if not live:
        return "unjustified skip", (
            f"{where}: skipped at {at:%H:%M:%S.%f} for live execution {holder_id}, "
            f"which was not live then ({describe(holder) if holder else 'unknown'})"
        )
    return "skipped (singleton still live, audited)", None


def skip_holder(facts, skipped, live):
    """The execution a skip names: "<id> <state>", or "for <instant>" when an
    earlier instant of the same job fired in the same tick."""
    words = live.split()
    if len(words) == 2 and words[0] == "for":
        instant = as_utc(datetime.fromisoformat(words[1]))
        attempts = facts.by_instant.get((skipped["job"], instant), [])
        return attempts[0] if attempts else None
    if words and words[0].isdigit():
        return facts.executions.get(int(words[0]))
    return None


def check_runs(facts):
    """Check 2."""
    violations = []
    for run in facts.runs.values():
        execution = facts.executions.get(run.execution)
        if execution is None:
            violations.append(f"ledger run of unknown execution {run.execution}")
            continue
        if run.starts > 1:
            violations.append(f"execution {run.execution} started {run.starts} times")
        if (run.job, run.attempt) != (execution["job"], execution["attempt"]):
            violations.append(f"ledger run {run} does not match {describe(execution)}")
        if execution["claimed_at"] is None or execution["state"] in ("skipped", "pending"):
            violations.append(f"{describe(execution)} ran without being claimed: {run}")
    for execution in facts.executions.values():
        if execution["state"] != "succeeded":
            continue
        run = facts.runs.get(execution["id"])
        if run is None or run.end is None or run.killed is not None:
            violations.append(f"{describe(execution)} has no completed run in the ledger: {run}")
    if facts.malformed_ledger_lines:
        violations.append(f"{facts.malformed_ledger_lines} malformed ledger lines")
    return violations


def run_end(facts, run):
    """When the run stopped: its end, its SIGTERM, or its machine's SIGKILL."""
    ends = [t for t in (run.end, run.killed) if t is not None]
    death = facts.deaths.get(run.agent)
    if death is not None and death >= run.start:
        ends.append(death)
    return min(ends) if ends else None


def check_queue_limit(facts):
    """Check 3 for overlap queue: never more runs of the job at once than its
    max_concurrent, from the ledger (a run lasts until its end, its kill, or
    its agent's death)."""
    violations = []
    limits = {
        job["name"]: job["max_concurrent"] or 1
        for job in facts.jobs.values()
        if job.get("overlap") == "queue"
    }
    edges = defaultdict(list)
    for run in facts.runs.values():
        if run.job in limits:
            end = run_end(facts, run)
            if end is None:
                violations.append(f"{run.job}: run of execution {run.execution} never ended")
                continue
            edges[run.job] += [(run.start, 1, run.execution), (end, -1, run.execution)]
    for job, marks in sorted(edges.items()):
        running = set()
        for at, step, execution in sorted(marks, key=lambda m: (m[0], m[1])):
            if step < 0:
                running.discard(execution)
                continue
            running.add(execution)
            if len(running) > limits[job]:
                violations.append(
                    f"{job}: {len(running)} runs at {stamp(at)} (max_concurrent "
                    f"{limits[job]}): executions {sorted(running)}"
                )
    return violations


def check_singleton_overlap(facts):
    """Check 3."""
    violations = []
    singleton = {job["name"] for job in facts.jobs.values() if job["singleton"]}
    by_job = defaultdict(list)
    for run in facts.runs.values():
        if run.job in singleton:
            by_job[run.job].append(run)
    for job, runs in sorted(by_job.items()):
        runs.sort(key=lambda r: r.start)
        # Each run against the one that ends last among those before it.
        latest = None
        for before, after in zip(runs, runs[1:], strict=False):
            end = run_end(facts, before)
            if end is None:
                violations.append(f"{job}: run of execution {before.execution} never ended")
                continue
            if latest is None or end > run_end(facts, latest):
                latest = before
            before, end = latest, run_end(facts, latest)
            if after.start < end:
                violations.append(
                    f"{job}: execution {after.execution} on {after.agent} started at "
                    f"{stamp(after.start)} while execution {before.execution} on {before.agent} "
                    f"ran ({stamp(before.start)}..{stamp(end)}, overlap {end - after.start:.3f}s); "
                    f"{describe(facts.executions.get(before.execution))} / "
                    f"{describe(facts.executions.get(after.execution))}"
                )
        if runs and run_end(facts, runs[-1]) is None:
            violations.append(f"{job}: run of execution {runs[-1].execution} never ended")
    return violations


def check_nothing_stuck(facts):
    """Check 4."""
    return [
        f"left {e['state']} after the cluster settled: {describe(e)}"
        for e in facts.executions.values()
        if e["state"] not in FINAL
    ]


def check_repairs_audited(facts):
    """Check 5."""
    violations = []
    reaped = defaultdict(list)
    for event in facts.events("execution.reaped"):
        reaped[event["target_id"]].append(event)
    retried = defaultdict(list)
    for event in facts.events("execution.retry"):
        retried[event["target_id"]].append(event)
    released = Counter()
    for event in facts.events("runner.takeover"):
        released.update(str(pk) for pk in event["data"].get("released", []))

    for execution in facts.executions.values():
        key = str(execution["id"])
        events = reaped.pop(key, [])
        if execution["state"] == "lost":
            reasons = [e["data"].get("reason") for e in events]
            if reasons != [execution["lost_reason"]]:
                violations.append(f"{describe(execution)}: reaped audit events {reasons}")
            superseded = execution["lost_reason"] == "runner_superseded"
            if superseded != (released.pop(key, 0) == 1):
                violations.append(f"{describe(execution)}: takeover release audit mismatch")
        elif events:
            violations.append(f"{describe(execution)} is not lost but has a reaped event")
        events = retried.pop(key, [])
        if execution["trigger"] == "retry":
            previous = facts.by_instant[(execution["job"], execution["scheduled_for"])][
                execution["attempt"] - 2
            ]
            if [e["data"].get("previous") for e in events] != [previous["id"]]:
                violations.append(f"{describe(execution)}: retry audit events {events}")
        elif events:
            violations.append(f"{describe(execution)} is no retry but has a retry event")
    leftover = list(reaped) + list(retried) + [k for k, n in released.items() if n]
    for key in leftover:
        violations.append(f"repair audit events name execution {key}, which was not repaired")

    takeovers = Counter(e["actor"] for e in facts.events("runner.takeover"))
    for name, started in facts.started.items():
        low, high = max(0, len(facts.registered[name]) - 1), len(started) - 1
        if not low <= takeovers[name] <= high:
            violations.append(
                f"{name}: {takeovers[name]} takeovers audited; {len(started)} agent processes "
                f"started, {len(facts.registered[name])} of them registered"
            )
    return violations


def check_operator_saves(facts):
    """Check 7: an operator's admin save writes what the operator changed
    (the description) and nothing the loops own; no job was quarantined.
    The jobs come from `apply`, so the first save in the admin also adopts
    the job (`managed_by`, and `managed_source`, the file it leaves), as the
    admin says it will."""
    violations = [
        f"job {e['target_id']} quarantined: {e['data'].get('error')}"
        for e in facts.events("job.error")
    ]
    for event in operator_saves(facts):
        if set(event["data"]) - {"managed_by", "managed_source"} != {"description"}:
            violations.append(
                f"job {event['target_id']}: an operator's save wrote {sorted(event['data'])}"
            )
    return violations


def operator_saves(facts):
    return [e for e in facts.events("job.changed") if e["actor"] == OPERATOR]


def check_metrics(facts):
    """Check 6: each web process's /metrics against the database and audit."""
    violations = []
    finals = Counter(e["state"] for e in facts.executions.values() if e["state"] in FINAL)
    lost = Counter(e["lost_reason"] for e in facts.executions.values() if e["state"] == "lost")
    reaped = Counter(e["data"].get("reason") for e in facts.events("execution.reaped"))
    takeovers = Counter(e["actor"] for e in facts.events("runner.takeover"))
    skips = Counter(
        facts.executions[int(e["target_id"])]["job"] for e in facts.events("execution.skipped")
    )
    retries = Counter(e["data"].get("previous_state") for e in facts.events("execution.retry"))
    misfires = Counter(
        next(j["name"] for j in facts.jobs.values() if str(j["id"]) == e["target_id"])
        for e in facts.events("job.misfire")
    )
    expected = [
        ("croniq_executions_total", "state", finals),
        ("croniq_executions_reaped_total", "reason", lost),
        ("croniq_executions_reaped_total", "reason", reaped),
        ("croniq_runner_takeovers_total", "runner", takeovers),
        ("croniq_singleton_skips_total", "job", skips),
        ("croniq_retries_total", "reason", retries),
        ("croniq_misfires_total", "job", misfires),
    ]
    totals = [
        ("croniq_fencing_rejections_total", len(facts.events("execution.fencing_rejected"))),
        ("croniq_executions_given_up_total", len(facts.events("execution.given_up"))),
        ("croniq_runner_flaps_total", len(facts.events("runner.flapping"))),
        ("croniq_job_errors_total", len(facts.events("job.error"))),
        ("croniq_executions_pending", 0),
    ]
    for number, samples in enumerate(facts.metrics, start=1):
        for name, label, counts in expected:
            exported = {k: v for k, v in metric_by(samples, name, label).items() if v}
            wanted = {k: float(v) for k, v in counts.items() if v}
            if exported != wanted:
                violations.append(f"web {number}: {name} is {exported}, database says {wanted}")
        for name, count in totals:
            exported = metric_total(samples, name)
            if exported != count:
                violations.append(f"web {number}: {name} is {exported}, database says {count}")
    return violations


# -- reporting -----------------------------------------------------------------


def stamp(unix):
    return datetime.fromtimestamp(unix, UTC).strftime("%H:%M:%S.%f")[:-3]


def describe(execution):
    if execution is None:
        return "no such execution"
    finished = execution["finished_at"]
    return (
        f"execution {execution['id']} ({execution['job']} @ "
        f"{execution['scheduled_for']:%H:%M:%S.%f} attempt {execution['attempt']}, "
        f"{execution['trigger']}, {execution['state']}"
        + (f"/{execution['lost_reason']}" if execution["lost_reason"] else "")
        + f", runner {execution['runner']}, lease {execution['lease']}"
        + (f", finished {finished:%H:%M:%S.%f}" if finished else "")
        + (f", exit {execution['exit_code']}" if execution["exit_code"] is not None else "")
        + (f", error {execution['error'][:120]!r}" if execution["error"] else "")
        + ")"
    )


def summary(backend, seed, faults, facts, results, outcomes):
    states = Counter(e["state"] for e in facts.executions.values())
    reaps = Counter(e["data"].get("reason") for e in facts.events("execution.reaped"))
    rerun = sum(
        1
        for run in facts.runs.values()
        if run.end is not None and facts.executions[run.execution]["state"] == "lost"
    )
    rows = [("backend", backend), ("seed", seed)]
    rows += [(f"fault: {kind}", n) for kind, n in sorted(faults.injected.items())]
    rows += [
        ("faults injected", sum(faults.injected.values())),
        ("scheduled instants checked", sum(outcomes.values())),
    ]
    rows += [(f"instant: {outcome}", n) for outcome, n in sorted(outcomes.items())]
    rows += [("executions", len(facts.executions))]
    rows += [(f"execution: {state}", n) for state, n in sorted(states.items())]
    rows += [
        ("runs in the ledger", len(facts.runs)),
        ("completed runs whose report was lost (re-run)", rerun),
        ("retries", len(facts.events("execution.retry"))),
        ("reaps", sum(reaps.values())),
    ]
    rows += [(f"reap: {reason}", n) for reason, n in sorted(reaps.items())]
    rows += [
        ("takeovers", len(facts.events("runner.takeover"))),
        ("singleton skips", len(facts.events("execution.skipped"))),
        ("misfires", len(facts.events("job.misfire"))),
        ("fencing rejections", len(facts.events("execution.fencing_rejected"))),
        ("given up", len(facts.events("execution.given_up"))),
        ("flapping marks", len(facts.events("runner.flapping"))),
        ("operator saves", len(operator_saves(facts))),
    ]
    rows += [(f"violations: {name}", len(found)) for name, found in results.items()]
    rows += [("violations", sum(len(found) for found in results.values()))]
    width = max(len(label) for label, _ in rows)
    lines = [f"{'':-<{width + 12}}"]
    lines += [f"{label:<{width}}  {value}" for label, value in rows]
    lines.append(lines[0])
    return "\n".join(lines)
