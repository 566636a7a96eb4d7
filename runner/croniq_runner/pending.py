"""Why a run has not started, told from what the management API shows
(docs/design.md §8): the execution, its job, the runners and maintenance.

The server's dashboard answers the same question from its database
(dispatch.coverage); the API has no call for it, so `croniq mcp` derives it
here from the same rules a claim applies (docs/design.md §4, §10): a runner
takes a pending run when it is online, not drained, carries all the job's
labels (the run's pinned runner for `run_on: all`), its agent announced the
features the job needs (`stdin`, `run_as`, `http`, `container`, `limits`),
it has a free slot, no maintenance holds the job, and the run's instant has
come. What the API does not show (a retry's backoff, a concurrency group's use, and the runners'
features when an older server leaves them out) is named as a possibility,
never asserted.

Standard library only; every function takes `now`.
"""

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

Item = dict[str, Any]

# Runners named in a reason, at most (as the dashboard names them).
NAMED = 5
FINAL = ("succeeded", "failed", "timed_out", "lost", "cancelled", "skipped")
DERIVED = (
    "derived by croniq mcp from the run, its job, the runners list and maintenance "
    "(GET executions/{id}, jobs/{name}, runners, maintenance)"
)


def why_pending(
    execution: Item, job: Item, runners: list[Item], maintenance: Item, now: datetime
) -> Item:
    """{"run", "job", "state", "kind", "reason", "also", "uncertain", "derived"}:
    `kind` is what holds the run first (not_pending, queued, no_runner,
    unavailable, maintenance, not_yet, busy, free), `reason` says it to a
    person, `also` lists further holds, `uncertain` what may hold it that
    the API does not show."""
    state = execution["state"]
    if state == "pending":
        holds = pending_holds(execution, job, runners, maintenance, now)
    elif state == "queued":
        holds = [("queued", queued_reason(job))]
    else:
        holds = [("not_pending", not_pending_reason(execution))]
    kind, reason = holds[0] if holds else ("free", free_reason(execution, job, runners))
    return {
        "run": execution["id"],
        "job": execution["job"],
        "state": state,
        "kind": kind,
        "reason": reason,
        "also": [text for _, text in holds[1:]],
        "uncertain": uncertain(execution, job, runners) if state == "pending" else [],
        "derived": DERIVED,
    }


def pending_holds(
    execution: Item, job: Item, runners: list[Item], maintenance: Item, now: datetime
) -> list[tuple[str, str]]:
    """[(kind, reason)] of everything that keeps a pending run from a runner,
    the most lasting first."""
    holds = []
    labels = sorted(job.get("labels") or [])
    carrying = able(execution, labels, runners)
    candidates = equipped(carrying, needed_features(job))
    ready = taking_work(candidates)
    if not carrying:
        holds.append(("no_runner", no_runner_reason(execution, labels, runners)))
    elif not candidates:
        holds.append(("no_runner", outdated_reason(needed_features(job), labels, carrying)))
    elif not ready:
        holds.append(("unavailable", unavailable_reason(labels, candidates)))
    held = maintenance_reason(labels, maintenance)
    if held:
        holds.append(("maintenance", held))
    instant = parse_instant(execution["scheduled_for"])
    if instant > now:
        holds.append(("not_yet", f"it is scheduled for {instant:%Y-%m-%d %H:%M:%S} UTC, ahead"))
    if ready:
        used = sum(r.get("running", 0) for r in ready)
        slots = sum(r.get("capacity", 0) for r in ready)
        if used >= slots:
            who = f"the {plural(len(ready), 'runner')} {with_labels(labels)}"
            holds.append(("busy", f"{who} {is_are(ready)} busy: {used} of {slots} slots in use"))
    return holds


def able(execution: Item, labels: Iterable[str], runners: list[Item]) -> list[Item]:
    """The registered runners that may take the run, whatever their state:
    those carrying all of the job's labels, and for a run pinned to a
    runner (`run_on: all`) that runner alone."""
    pinned = execution.get("pinned_to") or ""
    return [
        r
        for r in runners
        if set(labels) <= set(r.get("labels") or ()) and (not pinned or r["name"] == pinned)
    ]


def needed_features(job: Item) -> list[str]:
    """What a runner's agent must have announced to take the job's runs
    (docs/design.md §4): `stdin` and `run_as` when the job sets them, `http`
    for an http job, `container` for a container job, `limits` for a limit
    an older agent would ignore (max_memory, max_cpu_seconds, on_max_output
    fail: the server's `Job.needs_limits`)."""
    needs = [name for name in ("stdin", "run_as") if job.get(name)]
    if job.get("kind") in ("http", "container"):
        needs.append(job["kind"])
    if job.get("max_memory") or job.get("max_cpu_seconds") or job.get("on_max_output") == "fail":
        needs.append("limits")
    return needs


def features_shown(runners: list[Item]) -> bool:
    """Whether the runners list says what each agent announced (`features`:
    servers older than it leave it out, and then nothing is asserted)."""
    return all("features" in r for r in runners)


def equipped(runners: list[Item], needs: list[str]) -> list[Item]:
    """The `runners` whose agents announced all of `needs`; all of them
    when the list does not show features."""
    if not features_shown(runners):
        return runners
    return [r for r in runners if set(needs) <= set(r.get("features") or ())]


def outdated_reason(needs: list[str], labels: list[str], carrying: list[Item]) -> str:
    """Why no runner carrying the job's labels may take it: each lacks a
    feature the job needs (as the dashboard says it, dispatch.coverage)."""
    missing = set().union(*(set(needs) - set(r.get("features") or ()) for r in carrying))
    falls_short, remedy = lacking(missing)
    named = ", ".join(
        f"{r['name']} ({r.get('version') or 'version unknown'})" for r in carrying[:NAMED]
    )
    more = f" and {len(carrying) - NAMED} more" if len(carrying) > NAMED else ""
    return (
        f"the job needs {listed(missing)}, which the agents of the runners "
        f"{with_labels(labels)} {falls_short}: {named}{more}; {remedy}"
    )


def lacking(missing: set[str]) -> tuple[str, str]:
    """How agents without the `missing` features fall short, and the
    remedy: an agent announces run_as only when its --allow-run-as names a
    user, so run_as alone missing may be the operator's choice; stdin or
    http missing means an older agent."""
    allow = "name the job's user in their --allow-run-as"
    if "run_as" not in missing:
        return "do not support", "upgrade croniq-runner"
    if missing == {"run_as"}:
        return (
            "do not allow (croniq-runner --allow-run-as) or predate",
            f"{allow}, or upgrade croniq-runner",
        )
    return "do not support", f"upgrade croniq-runner and {allow}"


def taking_work(runners: list[Item]) -> list[Item]:
    return [r for r in runners if r.get("state") == "online" and not r.get("drained")]


def no_runner_reason(execution: Item, labels: list[str], runners: list[Item]) -> str:
    pinned = execution.get("pinned_to") or ""
    if pinned:
        registered = any(r["name"] == pinned for r in runners)
        which = "no longer carries the job's labels" if registered else "is no longer registered"
        return f"it is pinned to runner {pinned} (run_on: all), which {which}"
    if labels:
        return f"no runner with labels {listed(labels)} has been seen; {online_summary(runners)}"
    return f"no runner has registered yet; {online_summary(runners)}"


def online_summary(runners: list[Item]) -> str:
    online = [r for r in runners if r.get("state") != "offline"]
    if not online:
        return "no runner is online"
    carried = set().union(*(set(r.get("labels") or ()) for r in online))
    kinds = listed(carried) if carried else "none has labels"
    return f"{plural(len(online), 'runner')} online: {kinds}"


def unavailable_reason(labels: list[str], candidates: list[Item]) -> str:
    states = [f"{r['name']} {'draining' if r.get('drained') else r['state']}" for r in candidates]
    more = f" and {len(states) - NAMED} more" if len(states) > NAMED else ""
    return (
        f"the runners {with_labels(labels)} are offline or draining: "
        f"{', '.join(states[:NAMED])}{more}"
    )


def maintenance_reason(labels: list[str], maintenance: Item) -> str | None:
    """Why maintenance holds a job with `labels`, or None: the global
    switch, or a window in force now for every job or one of its labels."""
    if maintenance.get("on"):
        why = f" ({maintenance['reason']})" if maintenance.get("reason") else ""
        return f"maintenance is switched on{why}: runners claim no new work until it is off"
    for window in maintenance.get("windows") or []:
        covered = not window.get("labels") or set(window["labels"]) & set(labels)
        if window.get("active") and covered:
            why = f" ({window['reason']})" if window.get("reason") else ""
            end = parse_instant(window["end"])
            return (
                f"a maintenance window{why} holds it until {end:%Y-%m-%d %H:%M:%S} UTC: "
                "runners claim nothing it covers meanwhile"
            )
    return None


def free_reason(execution: Item, job: Item, runners: list[Item]) -> str:
    labels = sorted(job.get("labels") or [])
    ready = taking_work(equipped(able(execution, labels, runners), needed_features(job)))
    free = sum(r.get("capacity", 0) - r.get("running", 0) for r in ready)
    who = f"the {plural(len(ready), 'runner')} {with_labels(labels)}"
    has = "has" if len(ready) == 1 else "have"
    return f"{who} {has} {plural(free, 'free slot')}: it should start at a runner's next poll"


def queued_reason(job: Item) -> str:
    overlap = job.get("overlap") or "allow"
    limit = job.get("max_concurrent") or 1
    why = f"its turn under the job's overlap policy ({overlap}, max_concurrent {limit})"
    if job.get("requires"):
        why += " or for the job's requirements (requires)"
    return f"it is queued: it waits {why}, and becomes pending when a live run ends"


def not_pending_reason(execution: Item) -> str:
    state = execution["state"]
    if state == "running":
        where = f" on runner {execution['runner']}" if execution.get("runner") else ""
        return f"it is not pending: it is running{where}"
    if state in FINAL:
        return f"it is not pending: it ended {state}"
    return f"it is not pending: it is {state}"


def uncertain(execution: Item, job: Item, runners: list[Item]) -> list[str]:
    """What may also hold a pending run that the API does not show."""
    notes = []
    if execution.get("attempt", 1) > 1:
        notes.append(
            f"attempt {execution['attempt']} is a retry: it may still wait out the job's "
            f"retry_backoff ({job.get('retry_backoff')} s, doubling per failure)"
        )
    # A container job's need is said by the note below, in an engine's words.
    features = [name for name in needed_features(job) if name != "container"]
    if features and not features_shown(runners):
        notes.append(
            f"the job needs {' and '.join(features)}: only agents that announce support for it "
            "take the run (croniq-runner upgraded; for run_as, --allow-run-as naming the user)"
        )
    if job.get("kind") == "container" and not features_shown(runners):
        notes.append(
            "the job is a container job: only runners whose agent found docker or podman take "
            "the run (they carry the label container)"
        )
    if job.get("concurrency_group"):
        notes.append(
            f"the job is in concurrency group {job['concurrency_group']}: the run waits while "
            "the group's running work is at its max_concurrent"
        )
    return notes


def parse_instant(text: str) -> datetime:
    """An instant of the API (ISO 8601 with an offset), in UTC."""
    return datetime.fromisoformat(text).astimezone(UTC)


def listed(labels: Iterable[str]) -> str:
    return ", ".join(sorted(labels))


def with_labels(labels: list[str]) -> str:
    return f"with labels {listed(labels)}" if labels else "online"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def is_are(items: list[Item]) -> str:
    return "is" if len(items) == 1 else "are"
